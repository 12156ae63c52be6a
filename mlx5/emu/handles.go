package emu

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// objType names the uverbs object types the emulated driver hands out handles for.
type objType uint8

const (
	objPD objType = iota + 1
	objMR
	objCQ
	objQP
	objCompChannel
	objAsyncEvent
	objUAR
)

var objTypeNames = map[objType]string{objPD: "PD", objMR: "MR", objCQ: "CQ", objQP: "QP",
	objCompChannel: "COMP_CHANNEL", objAsyncEvent: "ASYNC_EVENT", objUAR: "UAR"}

func (t objType) String() string { return objTypeNames[t] }

// handleTable is the per-file object table of uverbs (ufile->idr): one id space shared by
// every object type, ids allocated lowest-free from 0 as xa_alloc does, and a lookup that
// distinguishes an id that does not exist (ENOENT, lookup_get_idr_uobject) from an id of
// another type (EINVAL, rdma_lookup_get_uobject); both reach user space unchanged.
type handleTable struct {
	mu   sync.Mutex
	objs map[uint32]handleEntry
	next uint32 // lowest id that may be free
}

type handleEntry struct {
	typ objType
	obj any
}

func newHandleTable() *handleTable { return &handleTable{objs: make(map[uint32]handleEntry)} }

// add stores obj and returns its handle.
func (h *handleTable) add(typ objType, obj any) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := h.next
	for {
		if _, used := h.objs[id]; !used {
			break
		}
		id++
	}
	h.objs[id] = handleEntry{typ, obj}
	h.next = id + 1
	return id
}

// get returns the object of type typ under id.
func (h *handleTable) get(typ objType, id uint32) (any, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.objs[id]
	if !ok {
		return nil, fmt.Errorf("%v handle %d: no such object: %w", typ, id, unix.ENOENT)
	}
	if e.typ != typ {
		return nil, fmt.Errorf("%v handle %d is a %v: %w", typ, id, e.typ, unix.EINVAL)
	}
	return e.obj, nil
}

// remove drops id if it holds an object of type typ and the check (run under the table
// lock, so no concurrent lookup can race with the decision) allows it.
func (h *handleTable) remove(typ objType, id uint32, check func(obj any) error) (any, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.objs[id]
	if !ok {
		return nil, fmt.Errorf("%v handle %d: no such object: %w", typ, id, unix.ENOENT)
	}
	if e.typ != typ {
		return nil, fmt.Errorf("%v handle %d is a %v: %w", typ, id, e.typ, unix.EINVAL)
	}
	if check != nil {
		if err := check(e.obj); err != nil {
			return nil, err
		}
	}
	delete(h.objs, id)
	if id < h.next {
		h.next = id
	}
	return e.obj, nil
}

// all returns every object of type typ (for the teardown on close).
func (h *handleTable) all(typ objType) []uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []uint32
	for id, e := range h.objs {
		if e.typ == typ {
			ids = append(ids, id)
		}
	}
	return ids
}
