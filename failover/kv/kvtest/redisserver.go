package kvtest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisConfig describes the access control of a test redis-server.
type RedisConfig struct {
	// Password, if set, is the default user's password (requirepass).
	Password string
	// User and UserPassword, if User is set, add an ACL user and disable the default user.
	User, UserPassword string
	// KeyPattern restricts User's keys (an ACL pattern such as "shift/jobA/*"); empty allows
	// every key.
	KeyPattern string
	// Commands are User's command rules (e.g. "-@all +get +set"); empty allows every command.
	Commands []string
}

// RedisServer is a redis-server process owned by a test: on a free loopback port, in a
// temporary directory, with no persistence, stopped by t.Cleanup.
type RedisServer struct {
	Addr string // host:port
	cfg  RedisConfig
	cmd  *exec.Cmd

	mu     sync.Mutex
	exited bool
	done   chan struct{}
	log    bytes.Buffer
}

// StartRedis starts a redis-server for the test, or skips the test when redis-server is not
// installed.
func StartRedis(t testing.TB, cfg RedisConfig) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian package redis-server); the Redis backend tests need a real server")
	}
	var last error
	// The port is found free and then handed to the server, so another process may take
	// it in between: try a few ports.
	for try := 0; try < 5; try++ {
		s, err := startRedis(t, bin, cfg)
		if err == nil {
			return s
		}
		last = err
	}
	t.Fatalf("kvtest: start redis-server: %v", last)
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startRedis(t testing.TB, bin string, cfg RedisConfig) (*RedisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
		"--databases", "4",
	}
	if cfg.Password != "" {
		args = append(args, "--requirepass", cfg.Password)
	}
	if cfg.User != "" {
		keys := "~*"
		if cfg.KeyPattern != "" {
			keys = "~" + cfg.KeyPattern
		}
		cmds := cfg.Commands
		if len(cmds) == 0 {
			cmds = []string{"+@all"}
		}
		args = append(args, "--user", cfg.User, "on", ">"+cfg.UserPassword, keys, "&*")
		args = append(args, cmds...)
		args = append(args, "--user", "default", "off")
	}
	s := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cfg: cfg, done: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = dir
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if !once && strings.Contains(line, "Ready to accept connections") {
				once = true
				close(ready)
			}
		}
		s.cmd.Wait()
		s.mu.Lock()
		s.exited = true
		s.mu.Unlock()
		close(s.done)
	}()
	t.Cleanup(s.Kill)
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("redis-server exited at start: %s", s.Log())
	case <-time.After(30 * time.Second):
		s.Kill()
		return nil, fmt.Errorf("redis-server not ready after 30 s: %s", s.Log())
	}
}

// URL is the server's URL in the SHIFT_KV form for the configured credentials.
func (s *RedisServer) URL() string {
	switch {
	case s.cfg.User != "":
		return s.URLWith(s.cfg.User, s.cfg.UserPassword)
	case s.cfg.Password != "":
		return s.URLWith("", s.cfg.Password)
	}
	return s.URLWith("", "")
}

// URLWith is the server's URL with the given credentials (to test wrong ones).
func (s *RedisServer) URLWith(user, password string) string {
	u := url.URL{Scheme: "redis", Host: s.Addr, Path: "/1"}
	if password != "" {
		u.User = url.UserPassword(user, password)
	} else if user != "" {
		u.User = url.User(user)
	}
	return u.String()
}

// Log is what the server printed so far.
func (s *RedisServer) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Kill stops the server with SIGKILL (a crash, as far as clients can tell) and waits for it.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if !exited {
		s.cmd.Process.Signal(syscall.SIGCONT) // a stopped process would not die until continued
		s.cmd.Process.Kill()
	}
	<-s.done
}

// Pause stops the server with SIGSTOP: connections stay open but nothing answers, as with
// a hung host. Resume undoes it; Kill works on a paused server.
func (s *RedisServer) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *RedisServer) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Pid is the server's process id.
func (s *RedisServer) Pid() int { return s.cmd.Process.Pid }
