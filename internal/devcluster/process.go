package devcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a program started beside a local cluster (JobSet's controller, an add-on such as a
// second scheduler or Kueue), its output in a log file. It dies with the process that started
// it even when that is killed.
type Process struct {
	Name, Log string
	cmd       *exec.Cmd
	exited    chan error
}

// StartProcess runs bin with args and extra environment, logging to <logDir>/<name>.log.
func StartProcess(name, logDir string, env []string, bin string, args ...string) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %s is missing: build the tools with `bash hack/tools.sh cluster addons`", name, bin)
	}
	p := &Process{Name: name, Log: filepath.Join(logDir, name+".log"), exited: make(chan error, 1)}
	logs, err := os.Create(p.Log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logs.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { p.exited <- p.cmd.Wait(); logs.Close() }()
	return p, nil
}

// Exited is an error when the process has exited, naming its log; nil while it runs.
func (p *Process) Exited() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.Name, err, p.Log, logTail(p.Log))
	default:
		return nil
	}
}

// Stop sends SIGTERM, waits for the process to exit, and kills it after ten seconds.
func (p *Process) Stop() {
	if p.Exited() != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		p.exited <- <-p.exited
	}
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// Tail is the end of the process's log (its last 3,000 bytes).
func (p *Process) Tail() string { return logTail(p.Log) }

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }
