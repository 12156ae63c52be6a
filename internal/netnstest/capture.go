package netnstest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Frame is one captured Ethernet frame.
type Frame struct {
	Time time.Time
	Data []byte
}

// captureBuffer is the capture socket's receive buffer: large enough that a loaded machine
// does not drop frames before the reader gets to them.
const captureBuffer = 16 << 20

// Capture records every frame that crosses one interface, in both directions, through an
// AF_PACKET socket opened inside the interface's namespace, as tcpdump does. It keeps
// capturing across the interface going down and up.
type Capture struct {
	fd       int
	stopping atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	frames   []Frame
	err      error
	once     sync.Once
	result   error
}

// StartCapture starts capturing on v; the capture is stopped at the end of the test if Stop
// was not called.
func StartCapture(t testing.TB, v *Veth) *Capture {
	t.Helper()
	var fd int
	err := v.NS.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("netnstest: capture socket: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, captureBuffer); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netnstest: capture buffer: %w", err)
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
	c := &Capture{fd: fd}
	c.wg.Add(1)
	go c.read()
	t.Cleanup(func() { c.Stop() })
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// read polls the socket with a short timeout so it notices Stop, and on Stop drains what the
// socket still holds before returning.
func (c *Capture) read() {
	defer c.wg.Done()
	buf := make([]byte, 1<<16)
	pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	for {
		stopping := c.stopping.Load()
		n, _, err := unix.Recvfrom(c.fd, buf, unix.MSG_DONTWAIT)
		switch {
		case err == nil:
			fr := Frame{Time: time.Now(), Data: append([]byte(nil), buf[:n]...)}
			c.mu.Lock()
			c.frames = append(c.frames, fr)
			c.mu.Unlock()
			continue
		case errors.Is(err, unix.EAGAIN):
			if stopping {
				return // drained
			}
		case errors.Is(err, unix.ENETDOWN), errors.Is(err, unix.EINTR):
			// The interface went down: the socket reports it once and resumes capturing
			// when the interface comes back up.
			continue
		default:
			c.mu.Lock()
			c.err = fmt.Errorf("netnstest: capture read: %w", err)
			c.mu.Unlock()
			return
		}
		if _, err := unix.Poll(pfd, 20); err != nil && !errors.Is(err, unix.EINTR) {
			c.mu.Lock()
			c.err = fmt.Errorf("netnstest: capture poll: %w", err)
			c.mu.Unlock()
			return
		}
	}
}

// Frames returns the frames captured so far.
func (c *Capture) Frames() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...)
}

// Stop ends the capture after reading every frame the socket holds, releases the socket and
// returns the frames. The error is set if reading failed or the kernel dropped frames
// because the socket's buffer overflowed (the capture is then incomplete). It may be called
// more than once.
func (c *Capture) Stop() ([]Frame, error) {
	c.once.Do(func() {
		c.stopping.Store(true)
		c.wg.Wait()
		st, err := unix.GetsockoptTpacketStats(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		unix.Close(c.fd)
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case c.err != nil:
			c.result = c.err
		case err != nil:
			c.result = fmt.Errorf("netnstest: capture statistics: %w", err)
		case st.Drops != 0:
			c.result = fmt.Errorf("netnstest: capture dropped %d frames", st.Drops)
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...), c.result
}
