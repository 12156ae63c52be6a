package uverbs

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Async events (struct ib_uverbs_async_event_desc) and completion events (struct
// ib_uverbs_comp_event_desc) arrive on their own fds. The kernel hands out one event per read
// and rejects a buffer smaller than the event with EINVAL.

// Event sizes as the kernel writes them.
var (
	AsyncEventSize = sizeOf[AsyncEventDesc]()
	CompEventSize  = sizeOf[CompEventDesc]()
)

// ReadAsyncEvent reads one async event from the context's async fd. It blocks unless the fd is
// non-blocking (then EAGAIN when none is queued).
func ReadAsyncEvent(fd int) (AsyncEventDesc, error) {
	var b [16]byte
	n, err := unix.Read(fd, b[:AsyncEventSize])
	if err != nil {
		return AsyncEventDesc{}, cmdErr("read async event", err)
	}
	evs, err := DecodeAsyncEvents(b[:n])
	if err != nil || len(evs) != 1 {
		return AsyncEventDesc{}, fmt.Errorf("uverbs: read async event: %d bytes: %w", n, ErrMalformed)
	}
	return evs[0], nil
}

// ReadCompEvent reads one completion event from a completion channel fd; the event names the
// CQ by the user handle given at creation.
func ReadCompEvent(fd int) (CompEventDesc, error) {
	var b [8]byte
	n, err := unix.Read(fd, b[:CompEventSize])
	if err != nil {
		return CompEventDesc{}, cmdErr("read completion event", err)
	}
	evs, err := DecodeCompEvents(b[:n])
	if err != nil || len(evs) != 1 {
		return CompEventDesc{}, fmt.Errorf("uverbs: read completion event: %d bytes: %w", n, ErrMalformed)
	}
	return evs[0], nil
}

// DecodeAsyncEvents splits bytes read from an async fd into events; a length that is not a
// whole number of events is ErrMalformed.
func DecodeAsyncEvents(b []byte) ([]AsyncEventDesc, error) {
	if len(b)%AsyncEventSize != 0 {
		return nil, fmt.Errorf("uverbs: %d bytes of async events: %w", len(b), ErrMalformed)
	}
	out := make([]AsyncEventDesc, len(b)/AsyncEventSize)
	for i := range out {
		out[i] = fromBytes[AsyncEventDesc](b[i*AsyncEventSize:])
	}
	return out, nil
}

// DecodeCompEvents splits bytes read from a completion channel into events.
func DecodeCompEvents(b []byte) ([]CompEventDesc, error) {
	if len(b)%CompEventSize != 0 {
		return nil, fmt.Errorf("uverbs: %d bytes of completion events: %w", len(b), ErrMalformed)
	}
	out := make([]CompEventDesc, len(b)/CompEventSize)
	for i := range out {
		out[i] = fromBytes[CompEventDesc](b[i*CompEventSize:])
	}
	return out, nil
}

// Bytes encodes the event as the kernel writes it (for an emulated kernel).
func (e AsyncEventDesc) Bytes() []byte { return append([]byte(nil), structBytes(&e)...) }

// Bytes encodes the event as the kernel writes it (for an emulated kernel).
func (e CompEventDesc) Bytes() []byte { return append([]byte(nil), structBytes(&e)...) }

// WaitReadable waits up to timeout for fd to become readable (an event queued). It returns
// false on timeout.
func WaitReadable(fd int, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms < 0 {
			ms = 0
		}
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, cmdErr("poll", err)
		}
		return n > 0, nil
	}
}

var eventNames = map[uint32]string{
	EventCQErr: "CQ_ERR", EventQPFatal: "QP_FATAL", EventQPReqErr: "QP_REQ_ERR",
	EventQPAccessErr: "QP_ACCESS_ERR", EventCommEst: "COMM_EST", EventSQDrained: "SQ_DRAINED",
	EventPathMig: "PATH_MIG", EventPathMigErr: "PATH_MIG_ERR", EventDeviceFatal: "DEVICE_FATAL",
	EventPortActive: "PORT_ACTIVE", EventPortErr: "PORT_ERR", EventLIDChange: "LID_CHANGE",
	EventPkeyChange: "PKEY_CHANGE", EventSMChange: "SM_CHANGE", EventSRQErr: "SRQ_ERR",
	EventSRQLimitReached: "SRQ_LIMIT_REACHED", EventQPLastWQEReached: "QP_LAST_WQE_REACHED",
	EventClientReregister: "CLIENT_REREGISTER", EventGIDChange: "GID_CHANGE", EventWQFatal: "WQ_FATAL",
}

// EventName names an async event type as enum ibv_event_type does (without the prefix).
func EventName(t uint32) string {
	if n, ok := eventNames[t]; ok {
		return n
	}
	return fmt.Sprintf("EVENT_%d", t)
}
