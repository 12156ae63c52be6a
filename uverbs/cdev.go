package uverbs

import (
	"sync"

	"golang.org/x/sys/unix"
)

// Cdev is the real kernel behind File: an open /dev/infiniband/uverbsN. It owns its
// descriptor; Close releases it (and with it every object created through it, as the kernel
// does on the last close).
type Cdev struct {
	mu   sync.RWMutex // Close waits for calls in flight, so the fd is never reused under them
	fd   int
	path string
}

var _ File = (*Cdev)(nil)

// OpenCdev opens the uverbs character device at path read-write, close-on-exec. It does not
// check the ABI version; OpenDevice does.
func OpenCdev(path string) (*Cdev, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, cmdErr("open "+path, err)
	}
	return &Cdev{fd: fd, path: path}, nil
}

// NewCdev wraps fd, an open uverbs character device (a C provider hands over the command fd
// libibverbs opened). The Cdev owns fd from here on: Close closes it.
func NewCdev(fd int, path string) *Cdev { return &Cdev{fd: fd, path: path} }

func (c *Cdev) use() (int, func(), error) {
	c.mu.RLock()
	if c.fd < 0 {
		c.mu.RUnlock()
		return -1, nil, unix.EBADF
	}
	return c.fd, c.mu.RUnlock, nil
}

// Ioctl issues RDMA_VERBS_IOCTL with buf; see File.
func (c *Cdev) Ioctl(buf []byte) error {
	fd, done, err := c.use()
	if err != nil {
		return err
	}
	defer done()
	return ioctlVerbs(fd, buf)
}

// Write issues one write() command; a short write is reported as EIO (the kernel either
// consumes the whole command or fails it).
func (c *Cdev) Write(cmd []byte) error {
	fd, done, err := c.use()
	if err != nil {
		return err
	}
	defer done()
	n, err := unix.Write(fd, cmd)
	if err != nil {
		return err
	}
	if n != len(cmd) {
		return unix.EIO
	}
	return nil
}

// Mmap maps device pages shared, read-write, at the driver-defined offset.
func (c *Cdev) Mmap(offset int64, length int) ([]byte, error) {
	fd, done, err := c.use()
	if err != nil {
		return nil, err
	}
	defer done()
	return unix.Mmap(fd, offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}

// Munmap releases a mapping returned by Mmap.
func (c *Cdev) Munmap(b []byte) error { return unix.Munmap(b) }

// Fd returns the command descriptor, or -1 after Close.
func (c *Cdev) Fd() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.fd
}

// Close closes the descriptor once; later calls return nil.
func (c *Cdev) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	if err != nil {
		return cmdErr("close "+c.path, err)
	}
	return nil
}
