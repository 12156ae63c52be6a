package netnstest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Frame is one captured Ethernet frame.
type Frame struct {
	Time time.Time
	Data []byte
}

// Capture records every frame that crosses one interface, in both directions, through an
// AF_PACKET socket opened inside the interface's namespace, as tcpdump does. It keeps
// capturing across the interface going down and up.
type Capture struct {
	f      *os.File
	wg     sync.WaitGroup
	mu     sync.Mutex
	frames []Frame
	err    error
}

// StartCapture starts capturing on v; the capture is stopped at the end of the test if Stop
// was not called.
func StartCapture(t testing.TB, v *Veth) *Capture {
	t.Helper()
	var fd int
	err := v.NS.Do(func() error {
		proto := int(htons(unix.ETH_P_ALL))
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, proto)
		if err != nil {
			return fmt.Errorf("netnstest: capture socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: v.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netnstest: capture bind to %s: %w", v.Name, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &Capture{f: os.NewFile(uintptr(fd), "packet:"+v.Name)}
	c.wg.Add(1)
	go c.read()
	t.Cleanup(func() { c.Stop() })
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *Capture) read() {
	defer c.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, err := c.f.Read(buf)
		if errors.Is(err, unix.ENETDOWN) {
			// The interface went down: the socket reports it once and resumes capturing
			// when the interface comes back up.
			continue
		}
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
			}
			return
		}
		fr := Frame{Time: time.Now(), Data: append([]byte(nil), buf[:n]...)}
		c.mu.Lock()
		c.frames = append(c.frames, fr)
		c.mu.Unlock()
	}
}

// Frames returns the frames captured so far.
func (c *Capture) Frames() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...)
}

// Stop ends the capture, releases the socket and returns every frame captured, or the read
// error that ended it early. It may be called more than once.
func (c *Capture) Stop() ([]Frame, error) {
	c.f.Close()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...), c.err
}
