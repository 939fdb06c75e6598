package ratelog

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// StdLogger returns a *log.Logger for libraries that report peer-driven
// errors through the standard logger (net/http's Server.ErrorLog writes a
// line for every failed TLS handshake): each line becomes a record with
// message msg at level and the library's text as its "reason", so the
// limit applies per kind of error, not per peer address. The logger is
// wrapped as Wrap does (already limited loggers are reused as they are).
func StdLogger(l *slog.Logger, level slog.Level, msg string) *log.Logger {
	return log.New(stdWriter{log: Wrap(l, 0), level: level, msg: msg}, "", 0)
}

type stdWriter struct {
	log   *slog.Logger
	level slog.Level
	msg   string
}

func (w stdWriter) Write(p []byte) (int, error) {
	w.log.Log(context.Background(), w.level, w.msg, "reason", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
