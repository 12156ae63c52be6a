package emu

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// modifyQPReq is a decoded modify_qp (struct ib_uverbs_modify_qp, plus rate_limit for the
// extended command).
type modifyQPReq struct {
	handle uint32
	mask   QPAttrMask
	attr   qpAttr
	ex     bool
}

// modifyQP is ib_uverbs_modify_qp → ib_modify_qp_with_udata → mlx5_ib_modify_qp for RC: the
// same checks in the same order, then the transition applied to the NIC's QP.
func (f *File) modifyQP(r modifyQPReq) error {
	const op = "modify_qp"
	if err := f.needContext(op); err != nil {
		return err
	}
	qp, err := f.getQP(op, r.handle)
	if err != nil {
		return err
	}
	mask, a := r.mask, &r.attr
	allowed := attrStandardBits
	if r.ex {
		allowed |= AttrRateLimit
	}
	if mask&^allowed != 0 {
		return fmt.Errorf("%s: attr_mask %#x has unsupported bits: %w", op, uint32(mask), unix.EOPNOTSUPP)
	}
	if mask&AttrRateLimit != 0 {
		// Only raw packet QPs take a rate limit; for RC the state table refuses it.
		return fmt.Errorf("%s: rate limit on an RC QP: %w", op, ErrBadTransition)
	}
	if mask&AttrState != 0 && a.state > QPSErr {
		return fmt.Errorf("%s: qp_state %d: %w", op, a.state, unix.EINVAL)
	}
	if mask&AttrCurState != 0 && a.curState > QPSErr {
		return fmt.Errorf("%s: cur_qp_state %d: %w", op, a.curState, unix.EINVAL)
	}
	if mask&AttrPort != 0 {
		if _, ok := f.dev.port(int(a.port)); !ok {
			return fmt.Errorf("%s: port %d: %w", op, a.port, unix.EINVAL)
		}
	}
	if mask&AttrAV != 0 {
		if _, ok := f.dev.port(int(a.av.portNum)); !ok {
			return fmt.Errorf("%s: AV port %d: %w", op, a.av.portNum, unix.EINVAL)
		}
	}
	if mask&AttrAltPath != 0 {
		// _ib_modify_qp: alternate paths are banned on RoCE.
		return fmt.Errorf("%s: alternate path on RoCE: %w", op, unix.EINVAL)
	}

	qp.mu.Lock()
	defer qp.mu.Unlock()
	cur := qp.attr.state
	if mask&AttrCurState != 0 {
		cur = a.curState
	}
	next := cur
	if mask&AttrState != 0 {
		next = a.state
	}
	if err := modifyOK(cur, next, mask); err != nil {
		return fmt.Errorf("%s: qpn %#x: %w", op, qp.qpn, err)
	}
	port := qp.attr.port
	if mask&AttrPort != 0 {
		port = a.port
	}
	// mlx5_ib_modify_qp's own range checks.
	if mask&AttrPKeyIndex != 0 && a.pkeyIndex >= 1 {
		return fmt.Errorf("%s: pkey_index %d (RoCE table has 1 entry): %w", op, a.pkeyIndex, unix.EINVAL)
	}
	if mask&AttrMaxQPRdAtomic != 0 && uint32(a.maxRdAtomic) > f.dev.caps.MaxQPRdAtom {
		return fmt.Errorf("%s: max_rd_atomic %d > %d: %w", op, a.maxRdAtomic, f.dev.caps.MaxQPRdAtom, unix.EINVAL)
	}
	if mask&AttrMaxDestRdAtomic != 0 && uint32(a.maxDestRdAtomic) > f.dev.caps.MaxQPInitRdAtom {
		return fmt.Errorf("%s: max_dest_rd_atomic %d > %d: %w", op, a.maxDestRdAtomic, f.dev.caps.MaxQPInitRdAtom, unix.EINVAL)
	}
	if mask&AttrPathMTU != 0 {
		if a.pathMTU < MTU256 || a.pathMTU > MTU4096 {
			return fmt.Errorf("%s: path_mtu %d: %w", op, a.pathMTU, unix.EINVAL)
		}
		// Stricter than mlx5, which leaves it to the wire: a path MTU above the port's
		// active MTU could never be carried.
		if p, ok := f.dev.port(int(port)); ok && a.pathMTU > mtuForNetdev(p.NetdevMTU) {
			return fmt.Errorf("%s: path_mtu %d above port %d active MTU %d: %w", op, a.pathMTU.Bytes(), port, mtuForNetdev(p.NetdevMTU).Bytes(), unix.EINVAL)
		}
	}
	// The PRM fields are 5 bits (timeout, min_rnr_timer) and 3 bits (retry counts); mlx5
	// shifts the values into place without checking, so out-of-range values would corrupt
	// neighbouring fields. The emulator refuses them instead.
	if mask&AttrTimeout != 0 && a.timeout > 31 {
		return fmt.Errorf("%s: timeout %d: %w", op, a.timeout, unix.EINVAL)
	}
	if mask&AttrRetryCnt != 0 && a.retryCnt > 7 {
		return fmt.Errorf("%s: retry_cnt %d: %w", op, a.retryCnt, unix.EINVAL)
	}
	if mask&AttrRNRRetry != 0 && a.rnrRetry > 7 {
		return fmt.Errorf("%s: rnr_retry %d: %w", op, a.rnrRetry, unix.EINVAL)
	}
	if mask&AttrMinRNRTimer != 0 && a.minRNRTimer > 31 {
		return fmt.Errorf("%s: min_rnr_timer %d: %w", op, a.minRNRTimer, unix.EINVAL)
	}
	if mask&AttrDestQPN != 0 && a.destQPN > 0xffffff {
		return fmt.Errorf("%s: dest_qp_num %#x: %w", op, a.destQPN, unix.EINVAL)
	}
	if mask&AttrAV != 0 {
		// mlx5_set_path: a RoCE address vector must carry a GRH, whose sgid_index names a
		// populated GID (rdma_fill_sgid_attr).
		if !a.av.isGlobal {
			return fmt.Errorf("%s: RoCE address vector without GRH: %w", op, unix.EINVAL)
		}
		if a.av.sgidIndex != 0 {
			// rdma_get_gid_attr: no GID there (measured ENODATA on Linux 6.1).
			return fmt.Errorf("%s: sgid_index %d (one GID per port): %w", op, a.av.sgidIndex, unix.ENODATA)
		}
	}
	// The hardware may have moved the QP to ERR on its own; firmware refuses any transition
	// from a state the QP is not in, except to RESET or ERR.
	if hw := f.dev.hw.qpState(qp.qpn); hw != cur && next != QPSReset && next != QPSErr {
		return fmt.Errorf("%s: qpn %#x is in %v, not %v: %w", op, qp.qpn, hw, cur, unix.EINVAL)
	}

	na := qp.attr
	if next == QPSReset {
		na = qpAttr{}
	}
	applyAttrs(&na, a, mask&^(AttrState|AttrCurState))
	na.state = next
	if err := f.dev.hw.modifyQP(qp.qpn, cur, next, &na); err != nil {
		return fmt.Errorf("%s: qpn %#x %v→%v: %w", op, qp.qpn, cur, next, err)
	}
	qp.attr = na
	return nil
}

func applyAttrs(dst, src *qpAttr, mask QPAttrMask) {
	if mask&AttrAccessFlags != 0 {
		dst.accessFlags = src.accessFlags
	}
	if mask&AttrPKeyIndex != 0 {
		dst.pkeyIndex = src.pkeyIndex
	}
	if mask&AttrPort != 0 {
		dst.port = src.port
	}
	if mask&AttrQKey != 0 {
		dst.qkey = src.qkey
	}
	if mask&AttrAV != 0 {
		dst.av = src.av
	}
	if mask&AttrPathMTU != 0 {
		dst.pathMTU = src.pathMTU
	}
	if mask&AttrTimeout != 0 {
		dst.timeout = src.timeout
	}
	if mask&AttrRetryCnt != 0 {
		dst.retryCnt = src.retryCnt
	}
	if mask&AttrRNRRetry != 0 {
		dst.rnrRetry = src.rnrRetry
	}
	if mask&AttrRQPSN != 0 {
		dst.rqPSN = src.rqPSN & 0xffffff // _ib_modify_qp masks PSNs to 24 bits
	}
	if mask&AttrSQPSN != 0 {
		dst.sqPSN = src.sqPSN & 0xffffff
	}
	if mask&AttrMaxQPRdAtomic != 0 {
		dst.maxRdAtomic = src.maxRdAtomic
	}
	if mask&AttrMaxDestRdAtomic != 0 {
		dst.maxDestRdAtomic = src.maxDestRdAtomic
	}
	if mask&AttrMinRNRTimer != 0 {
		dst.minRNRTimer = src.minRNRTimer
	}
	if mask&AttrDestQPN != 0 {
		dst.destQPN = src.destQPN
	}
	if mask&AttrPathMigState != 0 {
		dst.pathMigState = src.pathMigState
	}
}

// queryQP returns the QP's attributes with the state the hardware holds.
func (f *File) queryQP(h uint32) (qpAttr, qpCap, bool, error) {
	const op = "query_qp"
	if err := f.needContext(op); err != nil {
		return qpAttr{}, qpCap{}, false, err
	}
	qp, err := f.getQP(op, h)
	if err != nil {
		return qpAttr{}, qpCap{}, false, err
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	// mlx5_ib_query_qp reads the state from firmware and caches it.
	qp.attr.state = f.dev.hw.qpState(qp.qpn)
	a := qp.attr
	a.curState = a.state
	return a, qp.cap, qp.sqSigAll, nil
}
