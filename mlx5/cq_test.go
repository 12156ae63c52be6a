package mlx5

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newCQ(t testing.TB, n, size int) (*CQ, DBRec) {
	t.Helper()
	q, err := NewCQ(mapped(t, n*size), n, size)
	if err != nil {
		t.Fatal(err)
	}
	q.Init()
	db, err := NewDBRec(mapped(t, DBRecSize))
	if err != nil {
		t.Fatal(err)
	}
	return q, db
}

// TestCQOwnership publishes and polls over several passes of the ring and checks that an
// entry left from the previous pass is never taken for a new one.
func TestCQOwnership(t *testing.T) {
	for _, size := range []int{64, 128} {
		q, db := newCQ(t, 8, size)
		var c CQE64
		if q.Poll(&c) {
			t.Fatalf("fresh CQ returned a CQE")
		}
		pi := uint32(0)
		for pass := 0; pass < 5; pass++ {
			for i := 0; i < 8; i++ {
				if !q.HasRoom(pi, db.ConsumerIndex()) {
					t.Fatalf("pass %d: no room at pi %d ci %d", pass, pi, db.ConsumerIndex())
				}
				in := CQE64{SopDropQPN: uint32(OpcodeRDMAWrite)<<24 | 0x99, WQECounter: uint16(pi), OpOwn: CQEReq << 4}
				q.Publish(pi, &in)
				pi++
			}
			if q.HasRoom(pi, db.ConsumerIndex()) {
				t.Fatalf("pass %d: room reported on a full CQ", pass)
			}
			for i := 0; i < 8; i++ {
				if !q.Poll(&c) {
					t.Fatalf("pass %d entry %d: not ready", pass, i)
				}
				if c.WQECounter != uint16(q.ConsumerIndex()-1) || c.QPN() != 0x99 || int(c.Owner()) != (pass&1) {
					t.Fatalf("pass %d: got %+v at ci %d", pass, c, q.ConsumerIndex()-1)
				}
			}
			if q.Poll(&c) {
				t.Fatalf("pass %d: stale entry taken as new: %+v", pass, c)
			}
			q.UpdateCI(db)
		}
	}
}

// TestCQConcurrent runs a producer goroutine (the device) and a consumer (the provider)
// over the same ring, flow-controlled by the doorbell record, as the race detector sees it.
func TestCQConcurrent(t *testing.T) {
	q, db := newCQ(t, 16, 64)
	const total = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	deadline := time.Now().Add(time.Minute)
	go func() {
		defer wg.Done()
		for pi := uint32(0); pi < total; pi++ {
			for !q.HasRoom(pi, db.ConsumerIndex()) {
				if time.Now().After(deadline) {
					return
				}
				runtime.Gosched()
			}
			c := CQE64{ByteCnt: pi * 3, WQECounter: uint16(pi), SopDropQPN: 7, OpOwn: CQERespSend << 4}
			q.Publish(pi, &c)
		}
	}()
	var c CQE64
	for n := uint32(0); n < total; {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %d CQEs", n)
		}
		if !q.Poll(&c) {
			runtime.Gosched()
			continue
		}
		if c.ByteCnt != n*3 || c.WQECounter != uint16(n) {
			t.Fatalf("CQE %d: %+v", n, c)
		}
		n++
		q.UpdateCI(db)
	}
	wg.Wait()
}

func TestCQArm(t *testing.T) {
	q, db := newCQ(t, 8, 64)
	uar, err := NewUARPage(mapped(t, AdapterPageSize))
	if err != nil {
		t.Fatal(err)
	}
	q.SetConsumerIndex(5)
	q.Arm(db, uar, 7, 1, true)
	v := uar.Load64(CQDoorbellOffset)
	if v != [8]byte{0x11, 0, 0, 5, 0, 0, 0, 7} {
		t.Fatalf("CQ doorbell % x", v)
	}
	cqn, w := ParseCQDoorbell(v)
	sn, sol, ci := ParseArmWord(w)
	if cqn != 7 || sn != 1 || !sol || ci != 5 {
		t.Fatalf("parsed cqn %d sn %d sol %v ci %d", cqn, sn, sol, ci)
	}
	if sn2, sol2, ci2 := db.Arm(); sn2 != 1 || !sol2 || ci2 != 5 {
		t.Fatalf("arm word in record: sn %d sol %v ci %d", sn2, sol2, ci2)
	}
	q.Arm(db, uar, 7, 6, false) // sn wraps at 2 bits
	if sn, sol, _ := db.Arm(); sn != 2 || sol {
		t.Fatalf("sn %d sol %v", sn, sol)
	}
}

func TestNewCQGeometry(t *testing.T) {
	for _, c := range []struct{ n, size, bytes int }{{8, 32, 256}, {6, 64, 384}, {8, 64, 100}} {
		if _, err := NewCQ(mapped(t, 4096), c.n, c.size); !errors.Is(err, ErrGeometry) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("NewCQ(%d, %d): %v", c.n, c.size, err)
		}
	}
}

func TestRQPostParse(t *testing.T) {
	q, err := NewRQ(mapped(t, 8*64), 8, 6) // 4 SGEs per WQE
	if err != nil {
		t.Fatal(err)
	}
	db, _ := NewDBRec(mapped(t, 8))
	sg := []DataSeg{{ByteCount: 10, LKey: 1, Addr: 100}, {ByteCount: 0, LKey: 2, Addr: 200}, {ByteCount: 30, LKey: 3, Addr: 300}}
	var out [4]DataSeg
	for i := 0; i < 20; i++ {
		idx, err := q.Post(sg)
		if err != nil || idx != uint32(i%8) {
			t.Fatalf("post %d: idx %d err %v", i, idx, err)
		}
		n, err := q.Parse(idx, out[:])
		if err != nil || n != 2 || out[0] != sg[0] || out[1] != sg[2] {
			t.Fatalf("parse %d: n %d err %v %+v", i, n, err, out[:n])
		}
	}
	q.Ring(db)
	if db.RecvCounter() != 20 {
		t.Fatalf("recv counter %d", db.RecvCounter())
	}
	full := []DataSeg{{1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {4, 4, 4}}
	idx, _ := q.Post(full)
	if n, _ := q.Parse(idx, out[:]); n != 4 || out[3] != full[3] {
		t.Fatalf("full list: n %d", n)
	}
	if _, err := q.Post(append(full, DataSeg{5, 5, 5})); !errors.Is(err, ErrMalformed) {
		t.Fatalf("5 SGEs in a 4-SGE WQE: %v", err)
	}
	if n, err := q.Parse(idx, out[:2]); !errors.Is(err, ErrShort) || n != 2 {
		t.Fatalf("parse into short dst: n %d err %v", n, err)
	}
}
