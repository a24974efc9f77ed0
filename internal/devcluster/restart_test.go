package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// listenEnv makes the test binary a component to restart (component): it listens on the port it
// names, listenDelay after it starts, until it is stopped (or a minute has passed).
const (
	listenEnv   = "KILN_TEST_COMPONENT_LISTEN"
	listenDelay = 500 * time.Millisecond
)

// TestMain runs the tests, or, with listenEnv set, the component
// TestRestartHoldsCreatesOffUntilThePortsAreBack starts and restarts.
func TestMain(m *testing.M) {
	if addr := os.Getenv(listenEnv); addr != "" {
		os.Exit(component(addr))
	}
	os.Exit(m.Run())
}

func component(addr string) int {
	time.Sleep(listenDelay)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute)) // a test that died leaves none behind for long
	for {
		conn, err := l.Accept()
		if err != nil {
			return 0
		}
		conn.Close()
	}
}

// A restarted component's ports are free while it is down: no kwokctl create may run (it would
// take them) until it listens on all of them again.
func TestRestartHoldsCreatesOffUntilThePortsAreBack(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // this test's own createLock
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	port := int(netip.MustParseAddrPort(addr).Port())
	c := &Cluster{Name: "restart", opts: Options{WorkDir: t.TempDir()}}
	pids := filepath.Join(c.opts.WorkDir, "clusters", c.Name, "pids")
	for _, d := range []string{pids, filepath.Join(c.opts.WorkDir, "clusters", c.Name, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	first := exec.Command(os.Args[0])
	first.Env = append(os.Environ(), listenEnv+"="+addr)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = first.Wait() }()
	t.Cleanup(func() { _ = first.Process.Kill() })
	if err := os.WriteFile(filepath.Join(pids, "component.pid"), []byte(strconv.Itoa(first.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	listening := func(context.Context) (bool, error) {
		p, err := listeningPorts(first.Process.Pid)
		return err == nil && p.Has(port), nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, listening); err != nil {
		t.Fatalf("the component never listened on %d: %v", port, err)
	}
	if own, err := listeningPorts(os.Getpid()); err != nil || own.Has(port) {
		t.Fatalf("this process's listening ports %v (%v) hold the component's %d", own, err, port)
	}
	t.Cleanup(func() { // whichever process the pid file names at the end, started again or not
		if pid, err := c.ComponentPID("component"); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	// While it restarts, a create waits: the lock is taken.
	held := make(chan error, 1)
	go func() {
		down := func(context.Context) (bool, error) { return !running(first.Process.Pid), nil }
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, down); err != nil {
			held <- err
			return
		}
		held <- tryLock()
	}()
	if err := c.RestartComponent(context.Background(), "component", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	again, err := c.ComponentPID("component")
	if err != nil {
		t.Fatal(err)
	}
	if again == first.Process.Pid {
		t.Fatal("the pid file names the stopped process")
	}
	if err := <-held; !errors.Is(err, context.Canceled) { // tryLock gave up: the lock was held
		t.Fatalf("a create could lock while the component was down (got %v)", err)
	}
	// Returned: it listens on its port again, and creates may run.
	if p, err := listeningPorts(again); err != nil || !p.Has(port) {
		t.Fatalf("RestartComponent returned before the component listened on %d again: %v %v", port, p, err)
	}
	if err := tryLock(); err != nil {
		t.Fatalf("the lock is still held after the restart: %v", err)
	}
}

// A process's listening ports are its listening sockets', not its connections'.
func TestListeningPortsAreTheListenersOfTheProcess(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	ports, err := listeningPorts(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	listening, dialed, gone := l.Addr().(*net.TCPAddr).Port, conn.LocalAddr().(*net.TCPAddr).Port, closed.Addr().(*net.TCPAddr).Port
	if !ports.Has(listening) || ports.Has(dialed) || ports.Has(gone) {
		t.Fatalf("listening ports %v: want %d, not the connection's %d nor the closed listener's %d", ports.UnsortedList(), listening, dialed, gone)
	}
	// IPv6 listeners are in the tcp6 table.
	l6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer l6.Close()
	if ports, err = listeningPorts(os.Getpid()); err != nil || !ports.Has(l6.Addr().(*net.TCPAddr).Port) {
		t.Fatalf("listening ports %v (%v): want the IPv6 listener's %d", ports.UnsortedList(), err, l6.Addr().(*net.TCPAddr).Port)
	}
}

// tryLock takes createLock without waiting, and lets it go.
func tryLock() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one try
	unlock, err := lockCreates(ctx)
	if err == nil {
		unlock()
	}
	return err
}

// A create waiting for the lock gives up when its context ends (a test's deadline, an interrupt),
// not only once the lock is free.
func TestLockCreatesWaitsOnlyAsLongAsItsContext(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	unlock, err := lockCreates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := lockCreates(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("locking while another holds the lock: got %v, want the context's deadline", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("gave up %v after its context ended", waited-300*time.Millisecond)
	}
	unlock()
	if err := tryLock(); err != nil {
		t.Fatalf("the lock is still held after unlock: %v", err)
	}
}
