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

	"k8s.io/apimachinery/pkg/util/wait"
)

// RestartComponent stops one of the cluster's processes (kube-apiserver, etcd, …), keeps it down
// for down, and starts it again exactly as kwokctl had started it: the same command line, folder
// and log file, its PID in kwokctl's pid file, so deleting the cluster stops it as before. It
// reads the command line from /proc (Linux).
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
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return err
	}
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own session, as kwokctl starts it
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s again: %w", name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it when the cluster is deleted
	return os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

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
