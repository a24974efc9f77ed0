package testenv

import (
	"bufio"
	"bytes"
	"sync"
)

// SyncBuffer is a buffer that goroutines (a logger, a running command) write while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines are the lines written so far.
func (b *SyncBuffer) Lines() []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader([]byte(b.String())))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
