package devcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
)

// RestartComponent stops one of the cluster's processes (kube-apiserver, etcd, …), keeps it down
// for down, and starts it again exactly as kwokctl had started it: the same command line,
// environment, folder and log file, its PID in kwokctl's pid file, so deleting the cluster stops
// it as before. It returns once the process listens again on every port it listened on. Until
// then no kwokctl create runs on this machine (createLock): counting down from 32767 to a free
// port, it would take one of them. It reads the command line, environment and ports from /proc
// (Linux).
func (c *Cluster) RestartComponent(ctx context.Context, name string, down time.Duration) error {
	dir := filepath.Join(c.opts.WorkDir, "clusters", c.Name)
	pidFile := filepath.Join(dir, "pids", name+".pid")
	pid, err := c.ComponentPID(name)
	if err != nil {
		return err
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("reading the command line of %s (pid %d): %w", name, pid, err)
	}
	args := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return fmt.Errorf("reading the environment of %s (pid %d): %w", name, pid, err)
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return err
	}
	ports, err := listeningPorts(pid)
	if err != nil {
		return fmt.Errorf("reading the ports %s (pid %d) listens on: %w", name, pid, err)
	}
	unlock, err := lockCreates(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := stop(ctx, pid); err != nil {
		return fmt.Errorf("stopping %s (pid %d): %w", name, pid, err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	logs, err := os.OpenFile(filepath.Join(dir, "logs", name+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logs.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = cwd, logs, logs
	cmd.Env = strings.Split(string(bytes.TrimRight(environ, "\x00")), "\x00")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own session, as kwokctl starts it
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s again: %w", name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it when the cluster is deleted
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	back := func(context.Context) (bool, error) {
		if !running(cmd.Process.Pid) {
			return false, fmt.Errorf("%s exited after starting again (its log: %s)", name, logs.Name())
		}
		now, err := listeningPorts(cmd.Process.Pid)
		return err == nil && now.IsSuperset(ports), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, relisten, true, back); err != nil {
		return fmt.Errorf("waiting for %s to listen again on ports %v: %w", name, sets.List(ports), err)
	}
	return nil
}

// relisten is how long a restarted component may take to listen on its ports again.
const relisten = 2 * time.Minute

// listeningPorts are the TCP ports process pid listens on: its sockets (/proc/<pid>/fd) that its
// network namespace's tables (/proc/<pid>/net/tcp, tcp6) list as listening.
func listeningPorts(pid int) (sets.Set[int], error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := sets.New[string]()
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			inodes.Insert(strings.TrimSuffix(inode, "]"))
		}
	}
	ports := sets.New[int]()
	for _, table := range []string{"tcp", "tcp6"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return nil, err
		}
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != tcpListen || !inodes.Has(f[9]) {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/net/%s: local address %q: %w", pid, table, f[1], err)
			}
			ports.Insert(int(port))
		}
	}
	return ports, nil
}

// tcpListen is the state of a listening socket in /proc/net/tcp (TCP_LISTEN).
const tcpListen = "0A"

// stop sends SIGTERM and waits for the process to be gone, killing it after 30 s.
func stop(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	gone := func(context.Context) (bool, error) { return !running(pid), nil }
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, gone); err == nil {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, gone)
}

// running says whether pid is a live process: not gone, and not a zombie left for a parent that
// is not there to reap it (kwokctl forked it and exited).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses, the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// ComponentPID is the process ID of one of the cluster's processes (kube-apiserver, etcd,
// kube-scheduler, kwok-controller, …), from kwokctl's pid file.
func (c *Cluster) ComponentPID(name string) (int, error) {
	pidFile := filepath.Join(c.opts.WorkDir, "clusters", c.Name, "pids", name+".pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, fmt.Errorf("%s of cluster %s: %w", name, c.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", pidFile, err)
	}
	return pid, nil
}
