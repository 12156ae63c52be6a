package uverbs

import (
	"encoding/binary"
	"errors"
	"testing"
)

// The decoders an emulated kernel runs on untrusted bytes, and the response decoders, must
// never panic and must agree with the encoders.

func FuzzParseIoctl(f *testing.F) {
	c := NewIoctl(ObjectQP, MethodQPCreate, 1)
	c.InU64(AttrCreateQPType, QPTypeRC)
	c.InObj(AttrCreateQPPDHandle, 3)
	c.Optional(c.InU32(AttrCreateQPFlags, 4))
	f.Add(c.Bytes())
	f.Add(make([]byte, IoctlHdrSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseIoctl(b)
		if err != nil {
			return
		}
		if int(r.Hdr.Length) != IoctlHdrSize+AttrSize*len(r.Attrs) {
			t.Fatalf("accepted inconsistent length %d for %d attrs", r.Hdr.Length, len(r.Attrs))
		}
		_ = r.Check([]AttrSpec{{ID: AttrCreateQPType, Kind: AttrConstIn, Mandatory: true, MinLen: 1, MaxLen: 8},
			{ID: AttrCreateQPPDHandle, Kind: AttrIDR}})
		for _, a := range r.Attrs {
			if a.Len <= 8 { // inline: no user memory is touched
				v, err := r.In(a.Attr_id)
				if err == nil && len(v) != int(r.Attrs[r.Find(a.Attr_id)].Len) {
					t.Fatalf("inline length %d for attr %d", len(v), a.Attr_id)
				}
				_, _ = r.Const(a.Attr_id)
			}
		}
	})
}

func FuzzParseWrite(f *testing.F) {
	le := binary.NativeEndian
	b := make([]byte, 16)
	le.PutUint32(b, CmdAllocPD)
	le.PutUint16(b[4:], 4)
	f.Add(b)
	ex := make([]byte, 32)
	le.PutUint32(ex, CmdFlagExtended|ExCmdQueryDevice)
	le.PutUint16(ex[4:], 1)
	f.Add(ex)
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := ParseWrite(b)
		if err != nil {
			return
		}
		if w.Extended {
			if w.CoreInLen+w.DriverInLen != len(w.Payload) {
				t.Fatalf("accepted %d+%d payload words for %d bytes", w.CoreInLen, w.DriverInLen, len(w.Payload))
			}
			_ = w.Core()
			_ = w.DriverIn()
			return
		}
		if int(w.Hdr.In_words)*4 != len(b) {
			t.Fatalf("accepted in_words %d for %d bytes", w.Hdr.In_words, len(b))
		}
		if w.CheckSizes(8, 4) == nil {
			_ = w.Core()
			_ = w.DriverIn()
		}
	})
}

func FuzzDecodeEvents(f *testing.F) {
	f.Add(AsyncEventDesc{Element: 1, Type: EventQPFatal}.Bytes())
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := DecodeAsyncEvents(b)
		if err == nil {
			var re []byte
			for _, e := range evs {
				re = append(re, e.Bytes()...)
			}
			if string(re) != string(b) {
				t.Fatalf("async events do not round-trip")
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
		if cs, err := DecodeCompEvents(b); err == nil && len(cs)*CompEventSize != len(b) {
			t.Fatalf("comp events length")
		}
	})
}

// FuzzResponseDecoders feeds arbitrary kernel responses to the typed decoders (a response
// shorter than the struct is zero-extended, as with an older kernel).
func FuzzResponseDecoders(f *testing.F) {
	f.Add(make([]byte, 200))
	f.Fuzz(func(t *testing.T, b []byte) {
		q := fromBytes[QueryQPResp](b)
		a := QPAttrFromQuery(&q)
		back := a.QueryResp()
		// Everything but reserved bytes survives the round trip.
		back.Reserved, q.Reserved = [5]uint8{}, [5]uint8{}
		back.Dest.Reserved, q.Dest.Reserved = 0, 0
		back.Alt_dest.Reserved, q.Alt_dest.Reserved = 0, 0
		norm := func(x uint8) uint8 { return boolU8(x != 0) }
		q.Dest.Is_global, q.Alt_dest.Is_global = norm(q.Dest.Is_global), norm(q.Alt_dest.Is_global)
		q.Sq_draining, q.Sq_sig_all = norm(q.Sq_draining), norm(q.Sq_sig_all)
		if back != q {
			t.Fatalf("query QP response does not round-trip:\n%+v\n%+v", q, back)
		}
		_ = fromBytes[ExQueryDeviceResp](b)
		_ = fromBytes[QueryPortRespEx](b)
		_ = fromBytes[GIDEntry](b).GIDBytes()
	})
}
