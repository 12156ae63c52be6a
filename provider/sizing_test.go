package provider

import (
	"errors"
	"testing"

	"github.com/shift-rdma/shift/provider/verbs"
)

// Expected values computed by hand from rdma-core's mlx5_calc_sq_size/mlx5_calc_rq_size for
// an RC QP (sq_overhead 192 with the default send ops, which include memory-window binds).
func TestQPLayoutMatchesLibmlx5(t *testing.T) {
	cases := []struct {
		name string
		c    verbs.QPCap
		want qpLayout
	}{
		{"perftest write_bw -t128 -I64", verbs.QPCap{MaxSendWR: 128, MaxRecvWR: 0, MaxSendSGE: 1, MaxInlineData: 64},
			// inl 192+align(4+64,16)=272 > 192+16 → 320; ring roundup(128*320)=65536.
			qpLayout{sqWQESize: 320, sqWQECnt: 1024, sqMaxPost: 204, sqMaxGS: 1, maxInline: 124, sqOffset: 0, bufSize: 65536}},
		{"pingpong 500/500 1 SGE", verbs.QPCap{MaxSendWR: 1, MaxRecvWR: 500, MaxSendSGE: 1, MaxRecvSGE: 1},
			// send WQE 192+16=208 → 256; ring 256 = 4 WQEBBs, max_post 1.
			// recv WQE 16; roundup(500)*16 = 8192 → 512 WQEs, shift 4.
			qpLayout{sqWQESize: 256, sqWQECnt: 4, sqMaxPost: 1, sqMaxGS: 1, maxInline: 60,
				rqWQECnt: 512, rqWQEShift: 4, rqMaxPost: 512, rqMaxGS: 1, sqOffset: 8192, bufSize: 8192 + 256}},
		{"4 SGEs both ways", verbs.QPCap{MaxSendWR: 64, MaxRecvWR: 3, MaxSendSGE: 4, MaxRecvSGE: 3},
			// send 192+64=256; ring 64*256=16384 → 256 WQEBBs; recv 48 → 64 stride, 4 WQEs → 256 bytes.
			qpLayout{sqWQESize: 256, sqWQECnt: 256, sqMaxPost: 64, sqMaxGS: 4, maxInline: 60,
				rqWQECnt: 4, rqWQEShift: 6, rqMaxPost: 4, rqMaxGS: 4, sqOffset: 256, bufSize: 256 + 16384}},
		{"tiny RQ padded to one WQEBB", verbs.QPCap{MaxSendWR: 2, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1},
			qpLayout{sqWQESize: 256, sqWQECnt: 8, sqMaxPost: 2, sqMaxGS: 1, maxInline: 60,
				rqWQECnt: 4, rqWQEShift: 4, rqMaxPost: 4, rqMaxGS: 1, sqOffset: 64, bufSize: 64 + 512}},
	}
	for _, tc := range cases {
		got, err := calcQPLayout(testLimits, tc.c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestQPLayoutRejectsOversize(t *testing.T) {
	for _, c := range []verbs.QPCap{
		{MaxSendWR: 1, MaxSendSGE: 21},                    // (512-192)/16 = 20 SGEs max
		{MaxSendWR: 1, MaxSendSGE: 1, MaxInlineData: 400}, // 192+404 > 512
		{MaxSendWR: 1 << 20, MaxSendSGE: 1},               // more WQEBBs than max_send_wqebb
		{MaxRecvWR: 1, MaxRecvSGE: 33},                    // 33*16 > max_rq_desc_sz
		{MaxRecvWR: 1 << 16, MaxRecvSGE: 1},               // above the device max_qp_wr
	} {
		if _, err := calcQPLayout(testLimits, c); !errors.Is(err, verbs.ErrInvalidArgument) {
			t.Errorf("%+v: err %v, want ErrInvalidArgument", c, err)
		}
	}
}

func TestCQEntries(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{1, 2}, {15, 16}, {16, 32}, {255, 256}, {1000, 1024}} {
		got, err := calcCQEntries(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("calcCQEntries(%d) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	if _, err := calcCQEntries(1 << 24); !errors.Is(err, verbs.ErrInvalidArgument) {
		t.Errorf("1<<24 CQEs accepted")
	}
}
