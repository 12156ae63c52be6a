package vmtest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// newcMember is one member as an independent reader of the newc format sees it.
type newcMember struct {
	name         string
	mode         uint32
	rmajor, rmin uint32
	data         []byte
}

// readNewc parses a newc archive strictly: magic, hex fields, 4-byte alignment of every
// header and every body, and the trailer last.
func readNewc(t *testing.T, b []byte) []newcMember {
	t.Helper()
	var out []newcMember
	off := 0
	for {
		if off%4 != 0 {
			t.Fatalf("header at offset %d is not 4-byte aligned", off)
		}
		if len(b)-off < 110 || string(b[off:off+6]) != "070701" {
			t.Fatalf("no newc header at offset %d", off)
		}
		field := func(i int) uint32 {
			s := string(b[off+6+8*i : off+14+8*i])
			if _, err := hex.DecodeString(s); err != nil {
				t.Fatalf("field %d at offset %d: %q is not hex", i, off, s)
			}
			v, _ := strconv.ParseUint(s, 16, 32)
			return uint32(v)
		}
		mode, size, rmaj, rmin, namesize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(namesize)-1])
		if b[off+110+int(namesize)-1] != 0 {
			t.Fatalf("name %q is not NUL-terminated", name)
		}
		data := off + 110 + int(namesize)
		data = (data + 3) &^ 3
		if name == "TRAILER!!!" {
			if data != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-data)
			}
			return out
		}
		out = append(out, newcMember{name, mode, rmaj, rmin, b[data : data+int(size)]})
		off = (data + int(size) + 3) &^ 3
	}
}

func TestArchiveNewc(t *testing.T) {
	host := filepath.Join(t.TempDir(), "prog")
	hostData := []byte("#!/bin/sh\necho odd length\n!")
	if err := os.WriteFile(host, hostData, 0o751); err != nil {
		t.Fatal(err)
	}
	a := newArchive()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.file("/usr/bin/prog", host))
	must(a.bytes("init", 0o755, []byte("x")))
	must(a.symlink("bin/sh", "busybox"))
	must(a.chardev("dev/console", 0o600, 5, 1))
	must(a.dir("tmp", 0o1777))
	must(a.bytes("init", 0o755, []byte("x"))) // identical duplicate: fine
	if err := a.bytes("init", 0o755, []byte("y")); err == nil {
		t.Error("conflicting duplicate entry accepted")
	}
	if err := a.bytes("dev/console/x", 0o644, nil); err == nil {
		t.Error("file under a device node accepted")
	}
	var buf bytes.Buffer
	n, err := a.writeTo(&buf)
	must(err)
	if n != int64(buf.Len()) {
		t.Errorf("writeTo returned %d, wrote %d", n, buf.Len())
	}
	got := map[string]newcMember{}
	var names []string
	for _, m := range readNewc(t, buf.Bytes()) {
		got[m.name] = m
		names = append(names, m.name)
	}
	want := []string{"bin", "bin/sh", "dev", "dev/console", "init", "tmp", "usr", "usr/bin", "usr/bin/prog"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("members %v, want %v (sorted, parents first)", names, want)
	}
	checks := []struct {
		name string
		mode uint32
		data string
	}{
		{"usr/bin/prog", modeRegular | 0o751, string(hostData)},
		{"init", modeRegular | 0o755, "x"},
		{"bin/sh", modeSymlink | 0o777, "busybox"},
		{"dev/console", modeCharDev | 0o600, ""},
		{"tmp", modeDir | 0o1777, ""},
		{"usr", modeDir | 0o755, ""},
	}
	for _, c := range checks {
		m := got[c.name]
		if m.mode != c.mode || string(m.data) != c.data {
			t.Errorf("%s: mode %o data %q, want mode %o data %q", c.name, m.mode, m.data, c.mode, c.data)
		}
	}
	if c := got["dev/console"]; c.rmajor != 5 || c.rmin != 1 {
		t.Errorf("dev/console is %d:%d, want 5:1", c.rmajor, c.rmin)
	}
	var again bytes.Buffer
	must2(t, a, &again)
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("writing the same archive twice gave different bytes")
	}

	// GNU cpio, where installed, is an independent reader of the same bytes.
	if _, err := exec.LookPath("cpio"); err == nil {
		cmd := exec.Command("cpio", "-it", "--quiet")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cpio -it: %v: %s", err, out)
		}
		list := strings.Fields(string(out))
		sort.Strings(list)
		if fmt.Sprint(list) != fmt.Sprint(want) {
			t.Errorf("cpio -it lists %v, want %v", list, want)
		}
		cmd = exec.Command("cpio", "-i", "--quiet", "--to-stdout", "usr/bin/prog")
		cmd.Stdin = bytes.NewReader(buf.Bytes())
		if out, err := cmd.Output(); err != nil || !bytes.Equal(out, hostData) {
			t.Errorf("cpio extracts usr/bin/prog as %q (%v), want %q", out, err, hostData)
		}
	}
}

func must2(t *testing.T, a *archive, buf *bytes.Buffer) {
	t.Helper()
	if _, err := a.writeTo(buf); err != nil {
		t.Fatal(err)
	}
}
