package vmtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// File type bits of a cpio mode, as in <sys/stat.h>.
const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeCharDev = 0o020000
)

// archive collects the files of an initramfs by guest path and writes them as a "newc" cpio
// archive, the format the kernel's initramfs unpacker reads (Documentation/driver-api/
// early-userspace/buffer-format.rst). Building it in Go instead of calling cpio keeps the
// output deterministic (sorted, fixed mtime and owner) and removes a host dependency.
type archive struct {
	entries map[string]*cpioEntry
}

// cpioEntry is one archive member. Exactly one of src, data or link supplies the content of
// a regular file or symlink.
type cpioEntry struct {
	mode         uint32 // type bits | permissions
	src          string // host file to copy
	data         []byte // literal content
	link         string // symlink target
	rmajor, rmin uint32 // device number of a character device
}

func newArchive() *archive { return &archive{entries: map[string]*cpioEntry{}} }

// clean turns a guest path into the archive's form: relative, slash-separated, no dots.
func clean(guest string) (string, error) {
	p := strings.TrimPrefix(path.Clean("/"+guest), "/")
	if p == "" || p == "." {
		return "", fmt.Errorf("vmtest: archive path %q names the root", guest)
	}
	return p, nil
}

// put adds e at guest, creating parent directories. A second entry for the same path must
// be identical in kind, otherwise the archive would depend on insertion order.
func (a *archive) put(guest string, e *cpioEntry) error {
	p, err := clean(guest)
	if err != nil {
		return err
	}
	if old, ok := a.entries[p]; ok {
		if old.mode&0o170000 == modeDir && e.mode&0o170000 == modeDir {
			return nil
		}
		if old.src == e.src && old.link == e.link && old.mode == e.mode && string(old.data) == string(e.data) {
			return nil
		}
		return fmt.Errorf("vmtest: archive path /%s added twice with different content", p)
	}
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if old, ok := a.entries[d]; ok {
			if old.mode&0o170000 != modeDir {
				return fmt.Errorf("vmtest: archive path /%s: parent /%s is not a directory", p, d)
			}
			break
		}
		a.entries[d] = &cpioEntry{mode: modeDir | 0o755}
	}
	a.entries[p] = e
	return nil
}

// dir adds an empty directory.
func (a *archive) dir(guest string, perm uint32) error {
	return a.put(guest, &cpioEntry{mode: modeDir | perm})
}

// file adds the host file src (following symlinks) at guest with its host permissions.
func (a *archive) file(guest, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("vmtest: archive: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("vmtest: archive: %s is not a regular file", src)
	}
	return a.put(guest, &cpioEntry{mode: modeRegular | uint32(st.Mode().Perm()), src: src})
}

// bytes adds a regular file with literal content.
func (a *archive) bytes(guest string, perm uint32, data []byte) error {
	return a.put(guest, &cpioEntry{mode: modeRegular | perm, data: data})
}

// symlink adds a symbolic link at guest pointing to target.
func (a *archive) symlink(guest, target string) error {
	return a.put(guest, &cpioEntry{mode: modeSymlink | 0o777, link: target})
}

// chardev adds a character device node; the kernel creates it while unpacking.
func (a *archive) chardev(guest string, perm, major, minor uint32) error {
	return a.put(guest, &cpioEntry{mode: modeCharDev | perm, rmajor: major, rmin: minor})
}

// writeTo writes the archive to w in sorted path order (so every directory precedes its
// contents) and returns the number of bytes written.
func (a *archive) writeTo(w io.Writer) (int64, error) {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<20)}
	for i, n := range names {
		if err := writeEntry(cw, uint32(i+1), n, a.entries[n]); err != nil {
			return cw.n, err
		}
	}
	if err := writeHeader(cw, "TRAILER!!!", 0, 0, 1, 0, 0, 0); err != nil {
		return cw.n, err
	}
	return cw.n, cw.w.(*bufio.Writer).Flush()
}

func writeEntry(cw *countWriter, ino uint32, name string, e *cpioEntry) error {
	var size int64
	var body io.Reader
	switch {
	case e.src != "":
		f, err := os.Open(e.src)
		if err != nil {
			return fmt.Errorf("vmtest: archive: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return fmt.Errorf("vmtest: archive: %w", err)
		}
		size, body = st.Size(), f
	case e.mode&0o170000 == modeSymlink:
		size, body = int64(len(e.link)), strings.NewReader(e.link)
	case e.mode&0o170000 == modeRegular:
		size, body = int64(len(e.data)), strings.NewReader(string(e.data))
	}
	nlink := uint32(1)
	if e.mode&0o170000 == modeDir {
		nlink = 2
	}
	if err := writeHeader(cw, name, ino, e.mode, nlink, size, e.rmajor, e.rmin); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	n, err := io.Copy(cw, body)
	if err != nil {
		return fmt.Errorf("vmtest: archive %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("vmtest: archive %s: file changed size while copying (%d != %d)", name, n, size)
	}
	return pad4(cw)
}

// writeHeader writes a newc header ("070701", thirteen 8-digit hex fields) and the
// NUL-terminated name, padded so the data starts on a 4-byte boundary.
func writeHeader(cw *countWriter, name string, ino, mode, nlink uint32, size int64, rmajor, rminor uint32) error {
	if size > 0xffffffff {
		return fmt.Errorf("vmtest: archive %s: %d bytes is too large for newc", name, size)
	}
	// Fields: ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor namesize check.
	_, err := fmt.Fprintf(cw, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%s\x00",
		ino, mode, 0, 0, nlink, 0, uint32(size), 0, 0, rmajor, rminor, len(name)+1, 0, name)
	if err != nil {
		return err
	}
	return pad4(cw)
}

func pad4(cw *countWriter) error {
	if r := cw.n % 4; r != 0 {
		_, err := cw.Write(make([]byte, 4-r))
		return err
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
