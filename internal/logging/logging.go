// Package logging builds kiln's logger: structured JSON lines (zap through logr) in production,
// with the object key that controller-runtime adds to every reconcile's logger.
package logging

import (
	"flag"
	"io"
	"os"
	"slices"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Options are the --zap-* flags (encoder, level, stacktrace level, time encoding).
type Options struct{ zap zap.Options }

// BindFlags registers the logging flags; the default is JSON at info level.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	o.zap.TimeEncoder = zapcore.ISO8601TimeEncoder
	o.zap.BindFlags(fs)
}

// New is the logger the options describe, writing to w (stderr when nil).
func (o *Options) New(w io.Writer) logr.Logger {
	if w == nil {
		w = os.Stderr
	}
	return logr.New(&lazySink{sink: zap.New(zap.UseFlagOptions(&o.zap), zap.WriteTo(w)).GetSink()})
}

// lazySink keeps the names and values given to a logger until it logs a line: controller-runtime
// gives every reconcile a logger with the object's key and a reconcile ID, zap encodes them
// at once, and most reconciles log nothing (a measurable share of kiln's CPU in a burst of jobs
// went there; measured: docs/performance.md, Measurements behind the code).
type lazySink struct {
	sink   logr.LogSink
	names  []string
	values []any
}

var _ logr.CallDepthLogSink = &lazySink{}

// Init tells the sink it is called one frame deeper than the logger thinks.
func (l *lazySink) Init(info logr.RuntimeInfo) {
	info.CallDepth++
	l.sink.Init(info)
}

func (l *lazySink) Enabled(level int) bool { return l.sink.Enabled(level) }

func (l *lazySink) Info(level int, msg string, kv ...any) { l.applied().Info(level, msg, kv...) }

func (l *lazySink) Error(err error, msg string, kv ...any) { l.applied().Error(err, msg, kv...) }

func (l *lazySink) WithValues(kv ...any) logr.LogSink {
	return &lazySink{sink: l.sink, names: l.names, values: append(slices.Clip(l.values), kv...)}
}

func (l *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{sink: l.sink, names: append(slices.Clip(l.names), name), values: l.values}
}

func (l *lazySink) WithCallDepth(depth int) logr.LogSink {
	if s, ok := l.sink.(logr.CallDepthLogSink); ok {
		return &lazySink{sink: s.WithCallDepth(depth), names: l.names, values: l.values}
	}
	return l
}

// applied is the sink with the names and values given so far.
func (l *lazySink) applied() logr.LogSink {
	s := l.sink
	for _, n := range l.names {
		s = s.WithName(n)
	}
	if len(l.values) > 0 {
		s = s.WithValues(l.values...)
	}
	return s
}
