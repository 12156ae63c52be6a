package provider_test

import (
	"errors"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/shift-rdma/shift/provider"
	"github.com/shift-rdma/shift/provider/verbs"
)

// The alloc_ucontext request follows libmlx5's get_total_uuars / get_num_low_lat_uuars and
// mlx5_init_context's check, with their errnos (the edges' parsing of MLX5_TOTAL_UUARS and
// MLX5_NUM_LOW_LAT_UUARS is tested in internal/shiftenv).
func TestBfregRequest(t *testing.T) {
	n := func(v int) *int { return &v }
	cases := []struct {
		total   int
		low     *int
		page    int
		wantTot uint32
		wantLow uint32
		errno   unix.Errno
	}{
		{0, nil, 4096, 16, 4, 0},             // libmlx5's defaults
		{300, nil, 4096, 300, 288, 0},        // at most 12 medium-latency bfregs
		{7, nil, 4096, 8, 4, 0},              // rounded up to whole UARs
		{1, n(0), 4096, 2, 0, 0},             // at least one page's worth
		{1, nil, 4096, 2, 0, unix.ENOMEM},    // 4 low-latency of 2
		{3, nil, 65536, 32, 20, 0},           // a 64 KiB page holds 16 UARs
		{512, nil, 4096, 512, 500, 0},        // MLX5_MAX_BFREGS
		{513, nil, 4096, 0, 0, unix.ENOMEM},  // above it once rounded
		{-1, nil, 4096, 0, 0, unix.EINVAL},   // negative total
		{16, n(-1), 4096, 0, 0, unix.EINVAL}, // negative low latency
		{16, n(0), 4096, 16, 4, 0},           // raised to total-12
		{16, n(16), 4096, 0, 0, unix.ENOMEM}, // no bfreg left for bfreg 0
		{16, n(15), 4096, 16, 15, 0},         // every BlueFlame bfreg low latency
		{24, n(2), 4096, 24, 12, 0},          // raised to total-12
	}
	for _, c := range cases {
		o := provider.Options{TotalBfregs: c.total, LowLatencyBfregs: c.low}
		low := "nil"
		if c.low != nil {
			low = strconv.Itoa(*c.low)
		}
		tot, lo, err := provider.BfregRequest(o, c.page)
		if c.errno != 0 {
			if !errors.Is(err, c.errno) || !errors.Is(err, verbs.ErrInvalidArgument) {
				t.Errorf("total %d low %s page %d: err %v, want %v", c.total, low, c.page, err, c.errno)
			}
			continue
		}
		if err != nil || tot != c.wantTot || lo != c.wantLow {
			t.Errorf("total %d low %s page %d: %d/%d %v, want %d/%d", c.total, low, c.page, tot, lo, err, c.wantTot, c.wantLow)
		}
	}
}

// OpenWith honours the bfreg Options and fails as libmlx5 does when they are out of range;
// Open reads no environment variable.
func TestOpenWithBfregs(t *testing.T) {
	tb := newTestbed(t)
	if _, err := provider.OpenWith(tb.names[0], provider.Options{TotalBfregs: 1000}); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("open with 1000 bfregs: %v, want ENOMEM", err)
	}
	t.Setenv("MLX5_TOTAL_UUARS", "1000") // ignored by the library: the edges read it
	plain, err := provider.Open(tb.names[0])
	if err != nil {
		t.Fatalf("Open with MLX5_TOTAL_UUARS set: %v, want the defaults", err)
	}
	plain.Close()
	one := 1
	ctx, err := provider.OpenWith(tb.names[0], provider.Options{TotalBfregs: 4, LowLatencyBfregs: &one})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, err := as[*provider.PD](ctx.AllocPD())
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	cq, err := as[*provider.CQ](ctx.CreateCQ(verbs.CQInitAttr{CQE: 16}))
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	// 4 bfregs: 0 (no BlueFlame), 1 and 2 medium latency, 3 low latency. The first QP gets
	// bfreg 3 (gross 5) without a lock, the next ones 1 (gross 1) and 2 (gross 4) with it,
	// then the least used of those again.
	want := []struct {
		gross uint32
		lock  bool
	}{{5, false}, {1, true}, {4, true}, {1, true}, {4, true}}
	var qps []*provider.QP
	defer func() {
		for _, q := range qps {
			q.Destroy()
		}
	}()
	for i, w := range want {
		q, err := as[*provider.QP](pd.CreateQP(verbs.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}))
		if err != nil {
			t.Fatalf("QP %d: %v", i, err)
		}
		qps = append(qps, q)
		if g, l := provider.QPBfreg(q); g != w.gross || l != w.lock {
			t.Errorf("QP %d on bfreg %d (lock %v), want %d (lock %v)", i, g, l, w.gross, w.lock)
		}
	}
}
