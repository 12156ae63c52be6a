//go:build ignore

// Input to cgo -godefs: the uapi structs and constants of the uverbs ABI. Run `go generate
// ./uverbs` (see generate.go) to rewrite ztypes_linux.go from the installed headers.

package uverbs

/*
#include <stdint.h>
#include <linux/types.h>
#include <sys/ioctl.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <rdma/rdma_user_rxe.h>
// The kernel-internal enums below (QP states, attribute mask, port states, event types, MTU,
// migration states) are not in the uapi headers; libibverbs' verbs.h mirrors the kernel's
// include/rdma/ib_verbs.h values one for one and is the public source for them. Only
// cgo -godefs needs it (for those constants); the layout table generated from this preamble
// builds without libibverbs-dev.
#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#endif
*/
import "C"

// Write-command headers (rdma/ib_user_verbs.h).
type CmdHdr C.struct_ib_uverbs_cmd_hdr
type ExCmdHdr C.struct_ib_uverbs_ex_cmd_hdr

// ioctl framing (rdma/rdma_user_ioctl_cmds.h).
type Attr C.struct_ib_uverbs_attr
type IoctlHdr C.struct_ib_uverbs_ioctl_hdr

// Events read from the async and completion fds.
type AsyncEventDesc C.struct_ib_uverbs_async_event_desc
type CompEventDesc C.struct_ib_uverbs_comp_event_desc

// Context.
type GetContextCmd C.struct_ib_uverbs_get_context
type GetContextResp C.struct_ib_uverbs_get_context_resp

// Device.
type QueryDeviceCmd C.struct_ib_uverbs_query_device
type QueryDeviceResp C.struct_ib_uverbs_query_device_resp
type ExQueryDeviceCmd C.struct_ib_uverbs_ex_query_device
type OdpCaps C.struct_ib_uverbs_odp_caps
type RssCaps C.struct_ib_uverbs_rss_caps
type TmCaps C.struct_ib_uverbs_tm_caps
type CqModerationCaps C.struct_ib_uverbs_cq_moderation_caps
type ExQueryDeviceResp C.struct_ib_uverbs_ex_query_device_resp

// Port and GIDs.
type QueryPortCmd C.struct_ib_uverbs_query_port
type QueryPortResp C.struct_ib_uverbs_query_port_resp
type QueryPortRespEx C.struct_ib_uverbs_query_port_resp_ex
type GIDEntry C.struct_ib_uverbs_gid_entry

// PD and MR.
type AllocPDCmd C.struct_ib_uverbs_alloc_pd
type AllocPDResp C.struct_ib_uverbs_alloc_pd_resp
type DeallocPDCmd C.struct_ib_uverbs_dealloc_pd
type RegMRCmd C.struct_ib_uverbs_reg_mr
type RegMRResp C.struct_ib_uverbs_reg_mr_resp
type DeregMRCmd C.struct_ib_uverbs_dereg_mr

// Completion channel and CQ.
type CreateCompChannelCmd C.struct_ib_uverbs_create_comp_channel
type CreateCompChannelResp C.struct_ib_uverbs_create_comp_channel_resp
type CreateCQCmd C.struct_ib_uverbs_create_cq
type ExCreateCQCmd C.struct_ib_uverbs_ex_create_cq
type CreateCQResp C.struct_ib_uverbs_create_cq_resp
type ExCreateCQResp C.struct_ib_uverbs_ex_create_cq_resp
type DestroyCQCmd C.struct_ib_uverbs_destroy_cq
type DestroyCQResp C.struct_ib_uverbs_destroy_cq_resp
type ReqNotifyCQCmd C.struct_ib_uverbs_req_notify_cq
type WC C.struct_ib_uverbs_wc

// QP.
type GlobalRoute C.struct_ib_uverbs_global_route
type AHAttr C.struct_ib_uverbs_ah_attr
type QPCap C.struct_ib_uverbs_qp_cap
type CreateQPCmd C.struct_ib_uverbs_create_qp
type ExCreateQPCmd C.struct_ib_uverbs_ex_create_qp
type CreateQPResp C.struct_ib_uverbs_create_qp_resp
type ExCreateQPResp C.struct_ib_uverbs_ex_create_qp_resp
type QPDest C.struct_ib_uverbs_qp_dest
type QueryQPCmd C.struct_ib_uverbs_query_qp
type QueryQPResp C.struct_ib_uverbs_query_qp_resp
type ModifyQPCmd C.struct_ib_uverbs_modify_qp
type ExModifyQPCmd C.struct_ib_uverbs_ex_modify_qp
type ExModifyQPResp C.struct_ib_uverbs_ex_modify_qp_resp
type DestroyQPCmd C.struct_ib_uverbs_destroy_qp
type DestroyQPResp C.struct_ib_uverbs_destroy_qp_resp
type PostSendCmd C.struct_ib_uverbs_post_send
type SendWR C.struct_ib_uverbs_send_wr
type PostSendResp C.struct_ib_uverbs_post_send_resp

// rxe driver data (rdma/rdma_user_rxe.h), used by the real-kernel tests.
type RxeMmapInfo C.struct_mminfo
type RxeCreateCQResp C.struct_rxe_create_cq_resp
type RxeCreateQPResp C.struct_rxe_create_qp_resp
type RxeSendWR C.struct_rxe_send_wr
type RxeSGE C.struct_rxe_sge
type RxeDMAInfo C.struct_rxe_dma_info
type RxeSendWQE C.struct_rxe_send_wqe
type RxeQueueBuf C.struct_rxe_queue_buf

// ABI version and framing.
const (
	AbiVersion                  = C.IB_USER_VERBS_ABI_VERSION
	CmdCommandMask              = C.IB_USER_VERBS_CMD_COMMAND_MASK
	CmdFlagExtended             = C.IB_USER_VERBS_CMD_FLAG_EXTENDED
	RDMAIoctlMagic              = C.RDMA_IOCTL_MAGIC
	RDMAVerbsIoctl              = C.RDMA_VERBS_IOCTL
	AttrFMandatory              = C.UVERBS_ATTR_F_MANDATORY
	AttrFValidOutput            = C.UVERBS_ATTR_F_VALID_OUTPUT
	UdataDriverDataFlag         = C.UVERBS_UDATA_DRIVER_DATA_FLAG
	AttrUHWIn                   = C.UVERBS_ATTR_UHW_IN
	AttrUHWOut                  = C.UVERBS_ATTR_UHW_OUT
	DriverIDUnknown             = C.RDMA_DRIVER_UNKNOWN
	DriverIDMLX5                = C.RDMA_DRIVER_MLX5
	DriverIDRXE                 = C.RDMA_DRIVER_RXE
	CoreSupportOptionalMRAccess = C.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS
)

// Legacy write() command numbers (enum ib_uverbs_write_cmds).
const (
	CmdGetContext        = C.IB_USER_VERBS_CMD_GET_CONTEXT
	CmdQueryDevice       = C.IB_USER_VERBS_CMD_QUERY_DEVICE
	CmdQueryPort         = C.IB_USER_VERBS_CMD_QUERY_PORT
	CmdAllocPD           = C.IB_USER_VERBS_CMD_ALLOC_PD
	CmdDeallocPD         = C.IB_USER_VERBS_CMD_DEALLOC_PD
	CmdCreateAH          = C.IB_USER_VERBS_CMD_CREATE_AH
	CmdModifyAH          = C.IB_USER_VERBS_CMD_MODIFY_AH
	CmdQueryAH           = C.IB_USER_VERBS_CMD_QUERY_AH
	CmdDestroyAH         = C.IB_USER_VERBS_CMD_DESTROY_AH
	CmdRegMR             = C.IB_USER_VERBS_CMD_REG_MR
	CmdRegSMR            = C.IB_USER_VERBS_CMD_REG_SMR
	CmdReregMR           = C.IB_USER_VERBS_CMD_REREG_MR
	CmdQueryMR           = C.IB_USER_VERBS_CMD_QUERY_MR
	CmdDeregMR           = C.IB_USER_VERBS_CMD_DEREG_MR
	CmdAllocMW           = C.IB_USER_VERBS_CMD_ALLOC_MW
	CmdBindMW            = C.IB_USER_VERBS_CMD_BIND_MW
	CmdDeallocMW         = C.IB_USER_VERBS_CMD_DEALLOC_MW
	CmdCreateCompChannel = C.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL
	CmdCreateCQ          = C.IB_USER_VERBS_CMD_CREATE_CQ
	CmdResizeCQ          = C.IB_USER_VERBS_CMD_RESIZE_CQ
	CmdDestroyCQ         = C.IB_USER_VERBS_CMD_DESTROY_CQ
	CmdPollCQ            = C.IB_USER_VERBS_CMD_POLL_CQ
	CmdPeekCQ            = C.IB_USER_VERBS_CMD_PEEK_CQ
	CmdReqNotifyCQ       = C.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ
	CmdCreateQP          = C.IB_USER_VERBS_CMD_CREATE_QP
	CmdQueryQP           = C.IB_USER_VERBS_CMD_QUERY_QP
	CmdModifyQP          = C.IB_USER_VERBS_CMD_MODIFY_QP
	CmdDestroyQP         = C.IB_USER_VERBS_CMD_DESTROY_QP
	CmdPostSend          = C.IB_USER_VERBS_CMD_POST_SEND
	CmdPostRecv          = C.IB_USER_VERBS_CMD_POST_RECV
	CmdAttachMcast       = C.IB_USER_VERBS_CMD_ATTACH_MCAST
	CmdDetachMcast       = C.IB_USER_VERBS_CMD_DETACH_MCAST
	CmdCreateSRQ         = C.IB_USER_VERBS_CMD_CREATE_SRQ
	CmdModifySRQ         = C.IB_USER_VERBS_CMD_MODIFY_SRQ
	CmdQuerySRQ          = C.IB_USER_VERBS_CMD_QUERY_SRQ
	CmdDestroySRQ        = C.IB_USER_VERBS_CMD_DESTROY_SRQ
	CmdPostSRQRecv       = C.IB_USER_VERBS_CMD_POST_SRQ_RECV
	CmdOpenXRCD          = C.IB_USER_VERBS_CMD_OPEN_XRCD
	CmdCloseXRCD         = C.IB_USER_VERBS_CMD_CLOSE_XRCD
	CmdCreateXSRQ        = C.IB_USER_VERBS_CMD_CREATE_XSRQ
	CmdOpenQP            = C.IB_USER_VERBS_CMD_OPEN_QP
)

// Extended write() command numbers; sent OR'ed with CmdFlagExtended.
const (
	ExCmdQueryDevice      = C.IB_USER_VERBS_EX_CMD_QUERY_DEVICE
	ExCmdCreateCQ         = C.IB_USER_VERBS_EX_CMD_CREATE_CQ
	ExCmdCreateQP         = C.IB_USER_VERBS_EX_CMD_CREATE_QP
	ExCmdModifyQP         = C.IB_USER_VERBS_EX_CMD_MODIFY_QP
	ExCmdCreateFlow       = C.IB_USER_VERBS_EX_CMD_CREATE_FLOW
	ExCmdDestroyFlow      = C.IB_USER_VERBS_EX_CMD_DESTROY_FLOW
	ExCmdCreateWQ         = C.IB_USER_VERBS_EX_CMD_CREATE_WQ
	ExCmdModifyWQ         = C.IB_USER_VERBS_EX_CMD_MODIFY_WQ
	ExCmdDestroyWQ        = C.IB_USER_VERBS_EX_CMD_DESTROY_WQ
	ExCmdCreateRWQIndTbl  = C.IB_USER_VERBS_EX_CMD_CREATE_RWQ_IND_TBL
	ExCmdDestroyRWQIndTbl = C.IB_USER_VERBS_EX_CMD_DESTROY_RWQ_IND_TBL
	ExCmdModifyCQ         = C.IB_USER_VERBS_EX_CMD_MODIFY_CQ
)

// ioctl object ids (enum uverbs_default_objects).
const (
	ObjectDevice      = C.UVERBS_OBJECT_DEVICE
	ObjectPD          = C.UVERBS_OBJECT_PD
	ObjectCompChannel = C.UVERBS_OBJECT_COMP_CHANNEL
	ObjectCQ          = C.UVERBS_OBJECT_CQ
	ObjectQP          = C.UVERBS_OBJECT_QP
	ObjectSRQ         = C.UVERBS_OBJECT_SRQ
	ObjectAH          = C.UVERBS_OBJECT_AH
	ObjectMR          = C.UVERBS_OBJECT_MR
	ObjectMW          = C.UVERBS_OBJECT_MW
	ObjectFlow        = C.UVERBS_OBJECT_FLOW
	ObjectXRCD        = C.UVERBS_OBJECT_XRCD
	ObjectRWQIndTbl   = C.UVERBS_OBJECT_RWQ_IND_TBL
	ObjectWQ          = C.UVERBS_OBJECT_WQ
	ObjectFlowAction  = C.UVERBS_OBJECT_FLOW_ACTION
	ObjectDM          = C.UVERBS_OBJECT_DM
	ObjectCounters    = C.UVERBS_OBJECT_COUNTERS
	ObjectAsyncEvent  = C.UVERBS_OBJECT_ASYNC_EVENT
)

// ioctl method ids.
const (
	MethodInvokeWrite     = C.UVERBS_METHOD_INVOKE_WRITE
	MethodInfoHandles     = C.UVERBS_METHOD_INFO_HANDLES
	MethodQueryPort       = C.UVERBS_METHOD_QUERY_PORT
	MethodGetContext      = C.UVERBS_METHOD_GET_CONTEXT
	MethodQueryContext    = C.UVERBS_METHOD_QUERY_CONTEXT
	MethodQueryGIDTable   = C.UVERBS_METHOD_QUERY_GID_TABLE
	MethodQueryGIDEntry   = C.UVERBS_METHOD_QUERY_GID_ENTRY
	MethodPDDestroy       = C.UVERBS_METHOD_PD_DESTROY
	MethodMRDestroy       = C.UVERBS_METHOD_MR_DESTROY
	MethodCQCreate        = C.UVERBS_METHOD_CQ_CREATE
	MethodCQDestroy       = C.UVERBS_METHOD_CQ_DESTROY
	MethodQPCreate        = C.UVERBS_METHOD_QP_CREATE
	MethodQPDestroy       = C.UVERBS_METHOD_QP_DESTROY
	MethodAsyncEventAlloc = C.UVERBS_METHOD_ASYNC_EVENT_ALLOC
)

// ioctl attribute ids, per method.
const (
	AttrCoreIn   = C.UVERBS_ATTR_CORE_IN
	AttrCoreOut  = C.UVERBS_ATTR_CORE_OUT
	AttrWriteCmd = C.UVERBS_ATTR_WRITE_CMD

	AttrQueryPortPortNum = C.UVERBS_ATTR_QUERY_PORT_PORT_NUM
	AttrQueryPortResp    = C.UVERBS_ATTR_QUERY_PORT_RESP

	AttrGetContextNumCompVectors   = C.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS
	AttrGetContextCoreSupport      = C.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT
	AttrQueryContextNumCompVectors = C.UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS
	AttrQueryContextCoreSupport    = C.UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT

	AttrQueryGIDTableEntrySize      = C.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE
	AttrQueryGIDTableFlags          = C.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS
	AttrQueryGIDTableRespEntries    = C.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES
	AttrQueryGIDTableRespNumEntries = C.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES
	AttrQueryGIDEntryPort           = C.UVERBS_ATTR_QUERY_GID_ENTRY_PORT
	AttrQueryGIDEntryGIDIndex       = C.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX
	AttrQueryGIDEntryFlags          = C.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS
	AttrQueryGIDEntryRespEntry      = C.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY

	AttrDestroyPDHandle = C.UVERBS_ATTR_DESTROY_PD_HANDLE
	AttrDestroyMRHandle = C.UVERBS_ATTR_DESTROY_MR_HANDLE

	AttrCreateCQHandle      = C.UVERBS_ATTR_CREATE_CQ_HANDLE
	AttrCreateCQCQE         = C.UVERBS_ATTR_CREATE_CQ_CQE
	AttrCreateCQUserHandle  = C.UVERBS_ATTR_CREATE_CQ_USER_HANDLE
	AttrCreateCQCompChannel = C.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL
	AttrCreateCQCompVector  = C.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR
	AttrCreateCQFlags       = C.UVERBS_ATTR_CREATE_CQ_FLAGS
	AttrCreateCQRespCQE     = C.UVERBS_ATTR_CREATE_CQ_RESP_CQE
	AttrCreateCQEventFD     = C.UVERBS_ATTR_CREATE_CQ_EVENT_FD
	AttrDestroyCQHandle     = C.UVERBS_ATTR_DESTROY_CQ_HANDLE
	AttrDestroyCQResp       = C.UVERBS_ATTR_DESTROY_CQ_RESP

	AttrCreateQPHandle         = C.UVERBS_ATTR_CREATE_QP_HANDLE
	AttrCreateQPXRCDHandle     = C.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE
	AttrCreateQPPDHandle       = C.UVERBS_ATTR_CREATE_QP_PD_HANDLE
	AttrCreateQPSRQHandle      = C.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE
	AttrCreateQPSendCQHandle   = C.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE
	AttrCreateQPRecvCQHandle   = C.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE
	AttrCreateQPIndTableHandle = C.UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE
	AttrCreateQPUserHandle     = C.UVERBS_ATTR_CREATE_QP_USER_HANDLE
	AttrCreateQPCap            = C.UVERBS_ATTR_CREATE_QP_CAP
	AttrCreateQPType           = C.UVERBS_ATTR_CREATE_QP_TYPE
	AttrCreateQPFlags          = C.UVERBS_ATTR_CREATE_QP_FLAGS
	AttrCreateQPSourceQPN      = C.UVERBS_ATTR_CREATE_QP_SOURCE_QPN
	AttrCreateQPEventFD        = C.UVERBS_ATTR_CREATE_QP_EVENT_FD
	AttrCreateQPRespCap        = C.UVERBS_ATTR_CREATE_QP_RESP_CAP
	AttrCreateQPRespQPNum      = C.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM
	AttrDestroyQPHandle        = C.UVERBS_ATTR_DESTROY_QP_HANDLE
	AttrDestroyQPResp          = C.UVERBS_ATTR_DESTROY_QP_RESP

	AttrAsyncEventAllocFDHandle = C.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE
)

// Memory access flags (enum ib_uverbs_access_flags).
const (
	AccessLocalWrite      = C.IB_UVERBS_ACCESS_LOCAL_WRITE
	AccessRemoteWrite     = C.IB_UVERBS_ACCESS_REMOTE_WRITE
	AccessRemoteRead      = C.IB_UVERBS_ACCESS_REMOTE_READ
	AccessRemoteAtomic    = C.IB_UVERBS_ACCESS_REMOTE_ATOMIC
	AccessMWBind          = C.IB_UVERBS_ACCESS_MW_BIND
	AccessZeroBased       = C.IB_UVERBS_ACCESS_ZERO_BASED
	AccessOnDemand        = C.IB_UVERBS_ACCESS_ON_DEMAND
	AccessHugeTLB         = C.IB_UVERBS_ACCESS_HUGETLB
	AccessRelaxedOrdering = C.IB_UVERBS_ACCESS_RELAXED_ORDERING
	AccessOptionalRange   = C.IB_UVERBS_ACCESS_OPTIONAL_RANGE
)

// QP types (enum ib_uverbs_qp_type) and CQ/QP creation flags.
const (
	QPTypeRC        = C.IB_UVERBS_QPT_RC
	QPTypeUC        = C.IB_UVERBS_QPT_UC
	QPTypeUD        = C.IB_UVERBS_QPT_UD
	QPTypeRawPacket = C.IB_UVERBS_QPT_RAW_PACKET
	QPTypeXRCIni    = C.IB_UVERBS_QPT_XRC_INI
	QPTypeXRCTgt    = C.IB_UVERBS_QPT_XRC_TGT
	QPTypeDriver    = C.IB_UVERBS_QPT_DRIVER

	QPCreateSQSigAll           = C.IB_UVERBS_QP_CREATE_SQ_SIG_ALL
	CQFlagsTimestampCompletion = C.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION
	CQFlagsIgnoreOverrun       = C.IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN
)

// Work request opcodes and send flags as the generic POST_SEND and rxe's queues carry them
// (enum ib_uverbs_wr_opcode, enum ibv_send_flags), and completion opcodes (enum
// ib_uverbs_wc_opcode).
const (
	WROpRDMAWrite     = C.IB_UVERBS_WR_RDMA_WRITE
	WROpRDMAWriteImm  = C.IB_UVERBS_WR_RDMA_WRITE_WITH_IMM
	WROpSend          = C.IB_UVERBS_WR_SEND
	WROpRDMARead      = C.IB_UVERBS_WR_RDMA_READ
	SendFlagFence     = C.IBV_SEND_FENCE
	SendFlagSignaled  = C.IBV_SEND_SIGNALED
	SendFlagSolicited = C.IBV_SEND_SOLICITED
	SendFlagInline    = C.IBV_SEND_INLINE
	WCOpSend          = C.IB_UVERBS_WC_SEND
	WCOpRDMAWrite     = C.IB_UVERBS_WC_RDMA_WRITE
	WCOpRDMARead      = C.IB_UVERBS_WC_RDMA_READ
)

// GID types (enum ib_uverbs_gid_type).
const (
	GIDTypeIB     = C.IB_UVERBS_GID_TYPE_IB
	GIDTypeRoCEv1 = C.IB_UVERBS_GID_TYPE_ROCE_V1
	GIDTypeRoCEv2 = C.IB_UVERBS_GID_TYPE_ROCE_V2
)

// QP states (enum ib_qp_state / ibv_qp_state).
const (
	QPStateReset = C.IBV_QPS_RESET
	QPStateInit  = C.IBV_QPS_INIT
	QPStateRTR   = C.IBV_QPS_RTR
	QPStateRTS   = C.IBV_QPS_RTS
	QPStateSQD   = C.IBV_QPS_SQD
	QPStateSQE   = C.IBV_QPS_SQE
	QPStateErr   = C.IBV_QPS_ERR
)

// QP attribute mask bits (enum ib_qp_attr_mask / ibv_qp_attr_mask).
const (
	QPAttrState            = C.IBV_QP_STATE
	QPAttrCurState         = C.IBV_QP_CUR_STATE
	QPAttrEnSQDAsyncNotify = C.IBV_QP_EN_SQD_ASYNC_NOTIFY
	QPAttrAccessFlags      = C.IBV_QP_ACCESS_FLAGS
	QPAttrPkeyIndex        = C.IBV_QP_PKEY_INDEX
	QPAttrPort             = C.IBV_QP_PORT
	QPAttrQkey             = C.IBV_QP_QKEY
	QPAttrAV               = C.IBV_QP_AV
	QPAttrPathMTU          = C.IBV_QP_PATH_MTU
	QPAttrTimeout          = C.IBV_QP_TIMEOUT
	QPAttrRetryCnt         = C.IBV_QP_RETRY_CNT
	QPAttrRNRRetry         = C.IBV_QP_RNR_RETRY
	QPAttrRQPSN            = C.IBV_QP_RQ_PSN
	QPAttrMaxQPRdAtomic    = C.IBV_QP_MAX_QP_RD_ATOMIC
	QPAttrAltPath          = C.IBV_QP_ALT_PATH
	QPAttrMinRNRTimer      = C.IBV_QP_MIN_RNR_TIMER
	QPAttrSQPSN            = C.IBV_QP_SQ_PSN
	QPAttrMaxDestRdAtomic  = C.IBV_QP_MAX_DEST_RD_ATOMIC
	QPAttrPathMigState     = C.IBV_QP_PATH_MIG_STATE
	QPAttrCap              = C.IBV_QP_CAP
	QPAttrDestQPN          = C.IBV_QP_DEST_QPN
	QPAttrRateLimit        = C.IBV_QP_RATE_LIMIT
)

// Path MTU (enum ib_mtu) and path migration states (enum ib_mig_state).
const (
	MTU256  = C.IBV_MTU_256
	MTU512  = C.IBV_MTU_512
	MTU1024 = C.IBV_MTU_1024
	MTU2048 = C.IBV_MTU_2048
	MTU4096 = C.IBV_MTU_4096

	MigMigrated = C.IBV_MIG_MIGRATED
	MigRearm    = C.IBV_MIG_REARM
	MigArmed    = C.IBV_MIG_ARMED
)

// Port states (enum ib_port_state) and link layers.
const (
	PortNop         = C.IBV_PORT_NOP
	PortDown        = C.IBV_PORT_DOWN
	PortInit        = C.IBV_PORT_INIT
	PortArmed       = C.IBV_PORT_ARMED
	PortActive      = C.IBV_PORT_ACTIVE
	PortActiveDefer = C.IBV_PORT_ACTIVE_DEFER

	LinkLayerUnspecified = C.IBV_LINK_LAYER_UNSPECIFIED
	LinkLayerInfiniBand  = C.IBV_LINK_LAYER_INFINIBAND
	LinkLayerEthernet    = C.IBV_LINK_LAYER_ETHERNET
)

// Async event types (enum ib_event_type / ibv_event_type).
const (
	EventCQErr            = C.IBV_EVENT_CQ_ERR
	EventQPFatal          = C.IBV_EVENT_QP_FATAL
	EventQPReqErr         = C.IBV_EVENT_QP_REQ_ERR
	EventQPAccessErr      = C.IBV_EVENT_QP_ACCESS_ERR
	EventCommEst          = C.IBV_EVENT_COMM_EST
	EventSQDrained        = C.IBV_EVENT_SQ_DRAINED
	EventPathMig          = C.IBV_EVENT_PATH_MIG
	EventPathMigErr       = C.IBV_EVENT_PATH_MIG_ERR
	EventDeviceFatal      = C.IBV_EVENT_DEVICE_FATAL
	EventPortActive       = C.IBV_EVENT_PORT_ACTIVE
	EventPortErr          = C.IBV_EVENT_PORT_ERR
	EventLIDChange        = C.IBV_EVENT_LID_CHANGE
	EventPkeyChange       = C.IBV_EVENT_PKEY_CHANGE
	EventSMChange         = C.IBV_EVENT_SM_CHANGE
	EventSRQErr           = C.IBV_EVENT_SRQ_ERR
	EventSRQLimitReached  = C.IBV_EVENT_SRQ_LIMIT_REACHED
	EventQPLastWQEReached = C.IBV_EVENT_QP_LAST_WQE_REACHED
	EventClientReregister = C.IBV_EVENT_CLIENT_REREGISTER
	EventGIDChange        = C.IBV_EVENT_GID_CHANGE
	EventWQFatal          = C.IBV_EVENT_WQ_FATAL
)
