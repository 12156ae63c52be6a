package kv

import (
	"context"
	"errors"
	"testing"
)

func TestMem(t *testing.T) {
	ctx := context.Background()
	s := NewMem()
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	v := []byte{1, 2}
	if err := s.Put(ctx, "a", v); err != nil {
		t.Fatal(err)
	}
	v[0] = 9 // the store keeps its own copy
	got, err := s.Get(ctx, "a")
	if err != nil || len(got) != 2 || got[0] != 1 {
		t.Fatalf("get: %v %v", got, err)
	}
	s.SetDown(true)
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("down: %v", err)
	}
	if err := s.Put(ctx, "b", nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("down put: %v", err)
	}
	s.SetDown(false)
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Get(cctx, "a"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
