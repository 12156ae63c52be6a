package emu

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// QPState is a queue pair state as uverbs carries it (enum ib_qp_state in the kernel,
// enum ibv_qp_state in libibverbs; the numbering is shared).
type QPState uint32

// QP states.
const (
	QPSReset QPState = iota
	QPSInit
	QPSRTR
	QPSRTS
	QPSSQD
	QPSSQE
	QPSErr
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the IBA name of the state.
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint32(s))
}

// QPAttrMask selects the attributes of a modify_qp (enum ib_qp_attr_mask in
// include/rdma/ib_verbs.h, the same bits as enum ibv_qp_attr_mask).
type QPAttrMask uint32

// Attribute mask bits.
const (
	AttrState            QPAttrMask = 1 << 0
	AttrCurState         QPAttrMask = 1 << 1
	AttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	AttrAccessFlags      QPAttrMask = 1 << 3
	AttrPKeyIndex        QPAttrMask = 1 << 4
	AttrPort             QPAttrMask = 1 << 5
	AttrQKey             QPAttrMask = 1 << 6
	AttrAV               QPAttrMask = 1 << 7
	AttrPathMTU          QPAttrMask = 1 << 8
	AttrTimeout          QPAttrMask = 1 << 9
	AttrRetryCnt         QPAttrMask = 1 << 10
	AttrRNRRetry         QPAttrMask = 1 << 11
	AttrRQPSN            QPAttrMask = 1 << 12
	AttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	AttrAltPath          QPAttrMask = 1 << 14
	AttrMinRNRTimer      QPAttrMask = 1 << 15
	AttrSQPSN            QPAttrMask = 1 << 16
	AttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	AttrPathMigState     QPAttrMask = 1 << 18
	AttrCap              QPAttrMask = 1 << 19
	AttrDestQPN          QPAttrMask = 1 << 20
	AttrRateLimit        QPAttrMask = 1 << 25

	// attrStandardBits is IB_QP_ATTR_STANDARD_BITS of uverbs_cmd.c: the bits the
	// legacy modify_qp accepts; anything above is EOPNOTSUPP there.
	attrStandardBits QPAttrMask = (1 << 21) - 1
)

// rcTransition is one entry of the kernel's qp_state_table for IB_QPT_RC.
type rcTransition struct {
	valid    bool
	req, opt QPAttrMask
}

// rcStateTable is the RC column of qp_state_table in drivers/infiniband/core/verbs.c, which
// encodes IBA vol. 1 table 91 ("QP state transition properties"): which transitions exist and
// which attributes each requires or allows. ib_modify_qp_is_ok consults it before any driver
// runs, so every provider on every device meets the same rules.
var rcStateTable = [QPSErr + 1][QPSErr + 1]rcTransition{
	QPSReset: {
		QPSReset: {valid: true},
		QPSInit:  {valid: true, req: AttrPKeyIndex | AttrPort | AttrAccessFlags},
	},
	QPSInit: {
		QPSReset: {valid: true},
		QPSErr:   {valid: true},
		QPSInit:  {valid: true, opt: AttrPKeyIndex | AttrPort | AttrAccessFlags},
		QPSRTR: {valid: true,
			req: AttrAV | AttrPathMTU | AttrDestQPN | AttrRQPSN | AttrMaxDestRdAtomic | AttrMinRNRTimer,
			opt: AttrAltPath | AttrAccessFlags | AttrPKeyIndex},
	},
	QPSRTR: {
		QPSReset: {valid: true},
		QPSErr:   {valid: true},
		QPSRTS: {valid: true,
			req: AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrSQPSN | AttrMaxQPRdAtomic,
			opt: AttrCurState | AttrAltPath | AttrAccessFlags | AttrMinRNRTimer | AttrPathMigState},
	},
	QPSRTS: {
		QPSReset: {valid: true},
		QPSErr:   {valid: true},
		QPSRTS: {valid: true,
			opt: AttrCurState | AttrAccessFlags | AttrAltPath | AttrPathMigState | AttrMinRNRTimer},
		QPSSQD: {valid: true, opt: AttrEnSQDAsyncNotify},
	},
	QPSSQD: {
		QPSReset: {valid: true},
		QPSErr:   {valid: true},
		QPSRTS: {valid: true,
			opt: AttrCurState | AttrAltPath | AttrAccessFlags | AttrMinRNRTimer | AttrPathMigState},
		QPSSQD: {valid: true,
			opt: AttrPort | AttrAV | AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtomic |
				AttrMaxDestRdAtomic | AttrAltPath | AttrAccessFlags | AttrPKeyIndex | AttrMinRNRTimer |
				AttrPathMigState},
	},
	QPSSQE: {
		QPSReset: {valid: true},
		QPSErr:   {valid: true},
		// SQE→RTS exists in the table but has no RC column entry (SQE is not an RC
		// state); an RC QP therefore cannot leave SQE through RTS with any attribute.
		QPSRTS: {valid: true},
	},
	QPSErr: {
		QPSReset: {valid: true},
		QPSErr:   {valid: true},
	},
}

// ErrBadTransition is wrapped (with unix.EINVAL) by modifyOK for a transition the
// table forbids or an attribute mask it does not accept.
var ErrBadTransition = fmt.Errorf("illegal QP state transition or attribute mask: %w", unix.EINVAL)

// modifyOK is ib_modify_qp_is_ok for an RC QP: the transition cur→next must exist, the mask
// must hold every required attribute and nothing outside required|optional|STATE, and
// CUR_STATE may only be given from RTR, RTS, SQD or SQE.
func modifyOK(cur, next QPState, mask QPAttrMask) error {
	if cur > QPSErr || next > QPSErr {
		return fmt.Errorf("modify_qp %v→%v: %w", cur, next, ErrBadTransition)
	}
	if mask&AttrCurState != 0 && cur != QPSRTR && cur != QPSRTS && cur != QPSSQD && cur != QPSSQE {
		return fmt.Errorf("modify_qp %v→%v: CUR_STATE not allowed from %v: %w", cur, next, cur, ErrBadTransition)
	}
	t := rcStateTable[cur][next]
	if !t.valid {
		return fmt.Errorf("modify_qp %v→%v: %w", cur, next, ErrBadTransition)
	}
	if missing := t.req &^ mask; missing != 0 {
		return fmt.Errorf("modify_qp %v→%v: missing attributes %#x: %w", cur, next, uint32(missing), ErrBadTransition)
	}
	if extra := mask &^ (t.req | t.opt | AttrState); extra != 0 {
		return fmt.Errorf("modify_qp %v→%v: attributes %#x not allowed: %w", cur, next, uint32(extra), ErrBadTransition)
	}
	return nil
}
