// Package ratelog bounds the log lines a remote peer can cause. A peer that
// opens thousands of connections per second, sends bad frames or floods
// requests must not be able to fill the disk with log lines: each kind of
// line (its reason) is written at most once per interval, and the next line
// written for that reason carries the number of lines suppressed since
// (attribute "suppressed").
//
// Two forms share one implementation:
//
//   - Limiter.Allow, for call sites that pick their reason key;
//   - Wrap, a slog.Handler in front of another that keys on the record's
//     level, message and "reason" or "err" attribute (with digits removed,
//     so peer addresses, sizes and offsets do not make new reasons), for a
//     logger whose every line is driven by peers (a remoting server's
//     connections, an MQTT server's clients).
//
// Keys are meant to be constant strings (log messages); at most MaxKeys are
// tracked, and lines with a key beyond that share one overflow key, so the
// state stays bounded whatever the peers do.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the interval Wrap and New use when given 0: at most
// one line per reason every 10 seconds.
const DefaultInterval = 10 * time.Second

// MaxKeys bounds the reasons one Limiter tracks.
const MaxKeys = 1024

// SuppressedKey is the attribute added to a line after suppressed ones.
const SuppressedKey = "suppressed"

// overflowKey collects lines whose key did not fit in the table.
const overflowKey = "\x00ratelog-overflow"

type entry struct {
	next       time.Time // first time the next line may be written
	suppressed int64     // lines dropped since the last one written
}

// Limiter counts lines per reason and lets one through per interval. The
// zero value is not usable; a nil *Limiter allows everything. Safe for
// concurrent use.
type Limiter struct {
	interval time.Duration
	now      func() time.Time

	mu        sync.Mutex
	keys      map[string]*entry // protected by mu
	lastSweep time.Time         // protected by mu
}

// New returns a limiter allowing one line per reason per interval
// (DefaultInterval when 0). now is the clock (time.Now when nil).
func New(interval time.Duration, now func() time.Time) *Limiter {
	if interval <= 0 {
		interval = DefaultInterval
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{interval: interval, now: now, keys: make(map[string]*entry)}
}

// Allow reports whether a line for key may be written now and, if so, how
// many lines for key were suppressed since the last one written.
func (l *Limiter) Allow(key string) (ok bool, suppressed int64) {
	if l == nil {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		if len(l.keys) >= MaxKeys-1 && !now.Before(l.lastSweep.Add(l.interval)) {
			l.sweepLocked(now)
		}
		if len(l.keys) >= MaxKeys-1 { // one slot stays for the overflow key
			key = overflowKey
			e = l.keys[key]
		}
		if e == nil {
			e = &entry{}
			l.keys[key] = e
		}
	}
	if now.Before(e.next) {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.suppressed = 0
	e.next = now.Add(l.interval)
	return true, n
}

// sweepLocked forgets keys whose interval passed with nothing suppressed.
// It runs at most once per interval.
func (l *Limiter) sweepLocked(now time.Time) {
	l.lastSweep = now
	for k, e := range l.keys {
		if e.suppressed == 0 && !now.Before(e.next) {
			delete(l.keys, k)
		}
	}
}

// Log writes msg at level through log if the limiter allows a line for
// key now, adding the suppressed count when lines were dropped.
func (l *Limiter) Log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	if log == nil || !log.Enabled(context.Background(), level) {
		return
	}
	ok, n := l.Allow(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, SuppressedKey, n)
	}
	log.Log(context.Background(), level, msg, args...)
}

// handler is the slog.Handler form: records at or above min are limited
// by (level, message).
type handler struct {
	next slog.Handler
	lim  *Limiter
	min  slog.Level
}

// Wrap returns a logger writing through log's handler with every line at
// slog.LevelInfo or above limited per (level, message) to one per interval
// (DefaultInterval when 0). Debug lines pass unlimited: they are off
// unless an operator asked for them. A nil log gives a logger that
// discards.
func Wrap(log *slog.Logger, interval time.Duration) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	if h, ok := log.Handler().(*handler); ok {
		return slog.New(h) // already limited
	}
	return slog.New(&handler{next: log.Handler(), lim: New(interval, nil), min: slog.LevelInfo})
}

// NewHandler is Wrap for a handler, with the limiter and threshold given:
// records below min pass unlimited.
func NewHandler(next slog.Handler, lim *Limiter, min slog.Level) slog.Handler {
	return &handler{next: next, lim: lim, min: min}
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.min {
		return h.next.Handle(ctx, r)
	}
	ok, n := h.lim.Allow(recordKey(&r))
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64(SuppressedKey, n))
	}
	return h.next.Handle(ctx, r)
}

// maxReasonKey bounds the part of a key taken from a reason attribute.
const maxReasonKey = 96

// recordKey is a record's reason: level, message and the "reason" or "err"
// attribute without its digits.
func recordKey(r *slog.Record) string {
	b := make([]byte, 0, 64+len(r.Message))
	b = append(b, r.Level.String()...)
	b = append(b, ' ')
	b = append(b, r.Message...)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "reason" && a.Key != "err" {
			return true
		}
		b = append(b, '|')
		b = AppendReason(b, a.Value.String())
		return false
	})
	return string(b)
}

// AppendReason appends s without decimal digits and without what is
// between double quotes (names quoted with %q: client ids, topics, keys),
// cut at 96 bytes: the part of an error text that names its kind, not the
// peer, name, size or offset it happened with.
func AppendReason(dst []byte, s string) []byte {
	n, quoted := 0, false
	for i := 0; i < len(s) && n < maxReasonKey; i++ {
		c := s[i]
		switch {
		case quoted && c == '\\':
			i++ // an escape: the next byte is quoted text
		case c == '"':
			quoted = !quoted
			dst = append(dst, c)
			n++
		case !quoted && (c < '0' || c > '9'):
			dst = append(dst, c)
			n++
		}
	}
	return dst
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &handler{next: h.next.WithAttrs(attrs), lim: h.lim, min: h.min}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), lim: h.lim, min: h.min}
}
