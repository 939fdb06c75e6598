package benchmark

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client"
)

// Mode selects a workload.
type Mode string

const (
	Produce Mode = "produce" // send as fast as allowed; latency = send round trip
	Consume Mode = "consume" // consume what is there / arrives; latency = now - body stamp
	E2E     Mode = "e2e"     // both at once; latency = end to end from the body stamp
)

// Config describes one run. Zero values take the defaults shown.
type Config struct {
	Mode       Mode
	Registries []string
	Topic      string // default "BenchTopic"
	Group      string // consumer group, default "bench_group"
	Size       int    // body bytes, default 128 (at least 8: the time stamp)
	// Count bounds the messages sent (produce, e2e) or received (consume);
	// Duration bounds the time. At least one must be set; both may be.
	Count    int64
	Duration time.Duration
	// Concurrency is the number of producers (goroutines sending on one
	// shared Producer; with Async each keeps Window sends in flight).
	Concurrency int // default 1
	Async       bool
	Window      int // async sends in flight per goroutine, default 64
	Queues      int32
	// Consumers is the number of push consumers in the group (consume,
	// e2e). Default Concurrency.
	Consumers int
	// PullConnections is each consumer's pull connections per broker
	// (client.ConsumerOptions.PullConnections). Default 4.
	PullConnections int
	// Warmup (e2e) is a number of messages sent and consumed before the
	// measured run, outside its counts, rates and latencies: connections,
	// queue files and the runtime are warm when the clock starts. Default
	// 0.
	Warmup int64
	// Idle (consume, e2e) ends the consuming side when no message arrived
	// for this long: an empty or drained topic ends a consume run, and an
	// e2e run stops waiting for stragglers. Default DefaultIdle.
	Idle time.Duration
	// Rate limits sends per second over all goroutines (0 = unlimited).
	Rate   float64
	Logger *slog.Logger
	// Progress receives one line per second (nil: none).
	Progress io.Writer
}

// DefaultIdle is Config.Idle's default.
const DefaultIdle = 10 * time.Second

// ErrIdle: a consume run ended because no message arrived within
// Config.Idle, before any message arrived at all.
var ErrIdle = errors.New("benchmark: no message arrived")

// Report is the outcome of a run. Its JSON form gives every duration in
// milliseconds, in keys ending in Ms.
type Report struct {
	Mode       Mode          `json:"mode"`
	Size       int           `json:"size"`
	Sent       int64         `json:"sent"`
	Received   int64         `json:"received"`
	Errors     int64         `json:"errors"`
	Elapsed    time.Duration `json:"elapsed"`
	MsgsPerSec float64       `json:"msgsPerSec"`
	MBPerSec   float64       `json:"mbPerSec"`
	P50        time.Duration `json:"p50"`
	P90        time.Duration `json:"p90"`
	P99        time.Duration `json:"p99"`
	P999       time.Duration `json:"p999"`
	Max        time.Duration `json:"max"`
	// SendElapsed runs from the first send to the last acknowledgement
	// (produce, e2e); SendRate is Sent over it. Unlike MsgsPerSec it
	// leaves out the set-up (topic creation, consumer start) and the
	// consumer's catch-up at the end.
	SendElapsed time.Duration `json:"sendElapsed"`
	SendRate    float64       `json:"sendRate"`
	// IdleStop: the consuming side ended because nothing arrived for
	// Config.Idle.
	IdleStop bool `json:"idleStop"`
	// FirstError is the error of the first send that failed (Errors
	// counts them), so that a run that cannot reach its cluster says why.
	FirstError string `json:"firstError,omitempty"`
	// NotOK counts the sent messages (in Sent) the broker stored with a
	// status other than SEND_OK: a sync master with no slave to copy
	// them (SLAVE_NOT_AVAILABLE), a slave or a sync flush too slow
	// (FLUSH_SLAVE_TIMEOUT, FLUSH_DISK_TIMEOUT); FirstNotOK names the
	// first one's status. Without them such a run read as all well.
	NotOK      int64  `json:"notOk"`
	FirstNotOK string `json:"firstNotOk,omitempty"`
}

// MarshalJSON writes the report with durations as milliseconds.
func (r Report) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return json.Marshal(struct {
		Mode          Mode    `json:"mode"`
		Size          int     `json:"size"`
		Sent          int64   `json:"sent"`
		Received      int64   `json:"received"`
		Errors        int64   `json:"errors"`
		ElapsedMs     float64 `json:"elapsedMs"`
		MsgsPerSec    float64 `json:"msgsPerSec"`
		MBPerSec      float64 `json:"mbPerSec"`
		P50Ms         float64 `json:"p50Ms"`
		P90Ms         float64 `json:"p90Ms"`
		P99Ms         float64 `json:"p99Ms"`
		P999Ms        float64 `json:"p999Ms"`
		MaxMs         float64 `json:"maxMs"`
		SendElapsedMs float64 `json:"sendElapsedMs"`
		SendRate      float64 `json:"sendRate"`
		IdleStop      bool    `json:"idleStop"`
		FirstError    string  `json:"firstError,omitempty"`
		NotOK         int64   `json:"notOk"`
		FirstNotOK    string  `json:"firstNotOk,omitempty"`
	}{r.Mode, r.Size, r.Sent, r.Received, r.Errors, ms(r.Elapsed), r.MsgsPerSec, r.MBPerSec, ms(r.P50), ms(r.P90), ms(r.P99),
		ms(r.P999), ms(r.Max), ms(r.SendElapsed), r.SendRate, r.IdleStop, r.FirstError, r.NotOK, r.FirstNotOK})
}

// String renders the summary.
func (r Report) String() string {
	send := ""
	if r.Mode == E2E && r.SendElapsed > 0 {
		send = fmt.Sprintf(" (sending: %.0f msgs/s over %v)", r.SendRate, r.SendElapsed.Round(time.Millisecond))
	}
	first := ""
	if r.FirstError != "" {
		first = "; first error: " + r.FirstError
	}
	notOK := ""
	if r.NotOK > 0 {
		notOK = fmt.Sprintf(" (%d of them stored with a status other than SEND_OK, the first %s)", r.NotOK, r.FirstNotOK)
	}
	return fmt.Sprintf("%s: %d sent%s, %d received, %d errors in %v: %.0f msgs/s, %.2f MB/s%s; latency p50 %v p90 %v p99 %v p99.9 %v max %v%s",
		r.Mode, r.Sent, notOK, r.Received, r.Errors, r.Elapsed.Round(time.Millisecond), r.MsgsPerSec, r.MBPerSec, send,
		r.P50, r.P90, r.P99, r.P999, r.Max, first)
}

func (c *Config) fill() error {
	if c.Topic == "" {
		c.Topic = "BenchTopic"
	}
	if c.Group == "" {
		c.Group = "bench_group"
	}
	if c.Size == 0 {
		c.Size = 128
	}
	if c.Size < 8 {
		return fmt.Errorf("benchmark: size %d < 8 (the body carries a time stamp)", c.Size)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.Window <= 0 {
		c.Window = 64
	}
	if c.Queues <= 0 {
		c.Queues = 8
	}
	if c.Idle <= 0 {
		c.Idle = DefaultIdle
	}
	if c.Consumers <= 0 {
		c.Consumers = c.Concurrency
	}
	if c.PullConnections <= 0 {
		c.PullConnections = 4
	}
	if c.Count <= 0 && c.Duration <= 0 {
		return errors.New("benchmark: set a count or a duration")
	}
	switch c.Mode {
	case Produce, Consume, E2E:
	default:
		return fmt.Errorf("benchmark: unknown mode %q", c.Mode)
	}
	return nil
}

// counters are shared by the workers and the progress line.
type counters struct {
	sent, received, errors atomic.Int64
	sendNanos              atomic.Int64 // first send to last acknowledgement
	lastRecv               atomic.Int64 // unix ns of the latest arrival (0: none yet)
	sending                atomic.Bool  // e2e: the producer is running (the consumer does not idle out)
	lastSend               atomic.Int64 // e2e: unix ns when the producer stopped
	idle                   atomic.Bool  // the consuming side stopped for Idle
	firstErr               atomic.Pointer[error]
	refused                atomic.Pointer[error] // the first ErrBadMessage: the run stops
	abort                  context.CancelCauseFunc
	notOK                  atomic.Int64
	firstNotOK             atomic.Pointer[client.SendStatus]
}

// stored counts a sent message and one stored with a status other than
// SEND_OK, keeping the first such status for the report.
func (c *counters) stored(res *client.SendResult) {
	c.sent.Add(1)
	if res != nil && res.Status != client.SendOK {
		c.notOK.Add(1)
		st := res.Status
		c.firstNotOK.CompareAndSwap(nil, &st)
	}
}

// fail counts a failed send and keeps the first error for the report.
func (c *counters) fail(err error) {
	c.errors.Add(1)
	c.firstErr.CompareAndSwap(nil, &err)
	if errors.Is(err, client.ErrBadMessage) && c.refused.CompareAndSwap(nil, &err) && c.abort != nil {
		c.abort(err)
	}
}

// firstError is the first failed send's error text ("" when none failed).
func (c *counters) firstError() string {
	if e := c.firstErr.Load(); e != nil {
		return strings.ReplaceAll((*e).Error(), "\n", "; ") // joined errors on one line
	}
	return ""
}

// Run runs the workload and returns its report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if err := cfg.fill(); err != nil {
		return Report{}, err
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	// A message refused as invalid (too big for the client's or the
	// broker's limit) ends the run: every message of the run is alike,
	// so none would pass.
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	var cnt counters
	cnt.abort = abort
	var hist Histogram
	start := time.Now()

	var wg sync.WaitGroup
	progressDone := make(chan struct{})
	if cfg.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			progress(cfg.Progress, &cnt, &hist, start, progressDone)
		}()
	}
	var err error
	switch cfg.Mode {
	case Produce:
		err = produce(ctx, cfg, &cnt, &hist, true)
	case Consume:
		err = consume(ctx, cfg, &cnt, &hist, nil, nil, nil)
	case E2E:
		err = e2e(ctx, cfg, &cnt, &hist)
	}
	elapsed := time.Since(start)
	if e := cnt.refused.Load(); e != nil {
		err = fmt.Errorf("benchmark: stopped at the first message refused as invalid (every message of the run is alike): %w", *e)
	}
	close(progressDone)
	wg.Wait()
	n := cnt.sent.Load()
	if cfg.Mode != Produce {
		n = cnt.received.Load()
	}
	if cfg.Mode == Consume && cnt.idle.Load() {
		// The idle wait is not part of the run: it ended at the last arrival.
		if last := cnt.lastRecv.Load(); last > 0 {
			elapsed = time.Unix(0, last).Sub(start)
		}
		if cnt.received.Load() == 0 && err == nil {
			err = fmt.Errorf("%w within %v on topic %s", ErrIdle, cfg.Idle, cfg.Topic)
		}
	}
	r := Report{Mode: cfg.Mode, Size: cfg.Size, Sent: cnt.sent.Load(), Received: cnt.received.Load(), Errors: cnt.errors.Load(),
		IdleStop: cnt.idle.Load(), FirstError: cnt.firstError(), NotOK: cnt.notOK.Load(), Elapsed: elapsed, SendElapsed: time.Duration(cnt.sendNanos.Load()), P50: hist.Percentile(50), P90: hist.Percentile(90), P99: hist.Percentile(99), P999: hist.Percentile(99.9), Max: hist.Max()}
	if s := elapsed.Seconds(); s > 0 {
		r.MsgsPerSec = float64(n) / s
		r.MBPerSec = float64(n) * float64(cfg.Size) / s / 1e6
	}
	if s := r.SendElapsed.Seconds(); s > 0 {
		r.SendRate = float64(r.Sent) / s
	}
	if st := cnt.firstNotOK.Load(); st != nil {
		r.FirstNotOK = st.String()
	}
	return r, err
}

// progress writes one line a second: counts, rates and the latency
// percentiles of the run so far.
func progress(w io.Writer, cnt *counters, hist *Histogram, start time.Time, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastSent, lastRecv int64
	toldErr := false
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			s, r := cnt.sent.Load(), cnt.received.Load()
			fmt.Fprintf(w, "%5.0fs  sent %d (%d/s)  received %d (%d/s)  errors %d  latency p50 %v p99 %v max %v\n",
				now.Sub(start).Seconds(), s, s-lastSent, r, r-lastRecv, cnt.errors.Load(),
				roundLatency(hist.Percentile(50)), roundLatency(hist.Percentile(99)), roundLatency(hist.Max()))
			lastSent, lastRecv = s, r
			if e := cnt.firstError(); e != "" && !toldErr {
				toldErr = true
				fmt.Fprintf(w, "       first error: %s\n", e)
			}
		}
	}
}

// roundLatency keeps three significant digits or so for display.
func roundLatency(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

// limiter spaces sends to a rate (0 = unlimited).
type limiter struct {
	interval time.Duration
	mu       sync.Mutex
	next     time.Time
}

func newLimiter(rate float64) *limiter {
	if rate <= 0 {
		return &limiter{}
	}
	return &limiter{interval: time.Duration(float64(time.Second) / rate), next: time.Now()}
}

func (l *limiter) wait(ctx context.Context) bool {
	if l.interval == 0 {
		return ctx.Err() == nil
	}
	l.mu.Lock()
	at := l.next
	l.next = l.next.Add(l.interval)
	if now := time.Now(); l.next.Before(now.Add(-time.Second)) {
		l.next = now // do not burst after a stall
	}
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}

func stamp(body []byte) {
	binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
}

func stampAge(body []byte) time.Duration {
	if len(body) < 8 {
		return 0
	}
	return time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(body)))
}

func produce(ctx context.Context, cfg Config, cnt *counters, hist *Histogram, record bool) error {
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: cfg.Registries, Logger: cfg.Logger},
		Group: "bench_producer", DefaultTopicQueueNums: cfg.Queues})
	if err != nil {
		return err
	}
	defer p.Close()
	lim := newLimiter(cfg.Rate)
	var issued atomic.Int64
	take := func() bool {
		if cfg.Count > 0 && issued.Add(1) > cfg.Count {
			return false
		}
		return lim.wait(ctx)
	}
	var wg sync.WaitGroup
	start := time.Now()
	defer func() { cnt.sendNanos.Store(int64(time.Since(start))) }()
	for g := 0; g < cfg.Concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.Async {
				produceAsync(ctx, cfg, p, take, cnt, hist, record)
				return
			}
			for take() {
				body := make([]byte, cfg.Size)
				stamp(body)
				t0 := time.Now()
				res, err := p.Send(ctx, &client.Message{Topic: cfg.Topic, Body: body})
				if err != nil {
					if ctx.Err() == nil {
						cnt.fail(err)
					}
					continue
				}
				if record {
					hist.Record(time.Since(t0))
				}
				cnt.stored(res)
			}
		}()
	}
	wg.Wait()
	return nil
}

func produceAsync(ctx context.Context, cfg Config, p *client.Producer, take func() bool, cnt *counters, hist *Histogram, record bool) {
	sem := make(chan struct{}, cfg.Window)
	var wg sync.WaitGroup
	defer wg.Wait()
	for take() {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		body := make([]byte, cfg.Size)
		stamp(body)
		t0 := time.Now()
		wg.Add(1)
		err := p.SendAsync(ctx, &client.Message{Topic: cfg.Topic, Body: body}, func(res *client.SendResult, err error) {
			defer wg.Done()
			<-sem
			if err != nil {
				cnt.fail(err)
				return
			}
			if record {
				hist.Record(time.Since(t0))
			}
			cnt.stored(res)
		})
		if err != nil {
			wg.Done()
			<-sem
			cnt.fail(err)
		}
	}
}

// takeOne counts one more message in c unless limit (> 0) are counted
// already; it returns the new count.
func takeOne(c *atomic.Int64, limit int64) (int64, bool) {
	for {
		n := c.Load()
		if limit > 0 && n >= limit {
			return n, false
		}
		if c.CompareAndSwap(n, n+1) {
			return n + 1, true
		}
	}
}

// consume receives until Count messages arrived or ctx ends; ready (if
// set) is closed once the consumer holds its queues.
// Messages stamped before since (unix ns; nil: none) are older runs or
// the e2e warm-up: they are not counted, only added to warm (if set).
func consume(ctx context.Context, cfg Config, cnt *counters, hist *Histogram, ready chan<- struct{}, since, warm *atomic.Int64) error {
	done := make(chan struct{})
	var once sync.Once
	h := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if len(m.Body) < 8 {
				continue
			}
			if since != nil && int64(binary.BigEndian.Uint64(m.Body)) < since.Load() {
				cnt.lastRecv.Store(time.Now().UnixNano())
				if warm != nil {
					warm.Add(1)
				}
				continue
			}
			cnt.lastRecv.Store(time.Now().UnixNano())
			n, ok := takeOne(&cnt.received, cfg.Count)
			if !ok {
				break // the rest of the batch is past Count: not counted
			}
			hist.Record(stampAge(m.Body))
			if cfg.Count > 0 && n >= cfg.Count {
				once.Do(func() { close(done) })
			}
		}
		return client.ConsumeSuccess
	}
	var consumers []*client.PushConsumer
	defer func() {
		for _, c := range consumers {
			_ = c.Close()
		}
	}()
	for i := 0; i < cfg.Consumers; i++ {
		c, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: cfg.Registries, Logger: cfg.Logger,
			InstanceName: "bench" + strconv.Itoa(i)}, Group: cfg.Group, ConsumeBatchSize: 32, PullConnections: cfg.PullConnections}, h)
		if err != nil {
			return err
		}
		consumers = append(consumers, c)
		if err := c.Subscribe(cfg.Topic, "*"); err != nil {
			return err
		}
		if err := c.Start(ctx); err != nil {
			return err
		}
	}
	// Ready once the topic's queues are all held, or the count of held
	// queues stayed put for half a second (a topic made with fewer
	// queues), or after a grace: the run should not start mid-rebalance.
	deadline := time.Now().Add(5 * time.Second)
	last, stable := -1, time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n := 0
		for _, c := range consumers {
			for _, q := range c.Assigned() {
				if q.Topic == cfg.Topic {
					n++
				}
			}
		}
		if n >= int(cfg.Queues) || (n > 0 && n == last && time.Since(stable) >= 500*time.Millisecond) {
			break
		}
		if n != last {
			last, stable = n, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ready != nil {
		close(ready)
	}
	// Idle: no arrival for cfg.Idle since the later of the last arrival
	// and the moment the consumers were ready (e2e: and the end of the
	// sending; never while it sends).
	readyAt := time.Now().UnixNano()
	tick := time.NewTicker(min(cfg.Idle/10, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
			last := max(cnt.lastRecv.Load(), readyAt, cnt.lastSend.Load())
			if !cnt.sending.Load() && time.Since(time.Unix(0, last)) >= cfg.Idle {
				cnt.idle.Store(true)
				return nil
			}
		}
	}
}

func e2e(ctx context.Context, cfg Config, cnt *counters, hist *Histogram) error {
	// Make sure the topic exists before the consumer looks for it.
	warm, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: cfg.Registries},
		DefaultTopicQueueNums: cfg.Queues})
	if err != nil {
		return err
	}
	_, err = warm.Send(ctx, &client.Message{Topic: cfg.Topic, Body: make([]byte, cfg.Size)})
	_ = warm.Close()
	if err != nil {
		return fmt.Errorf("benchmark: create topic %s: %w", cfg.Topic, err)
	}
	var since, warmed atomic.Int64
	since.Store(time.Now().UnixNano())
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan struct{})
	cerr := make(chan error, 1)
	var ignored Histogram
	cnt.sending.Store(true)
	defer cnt.sending.Store(false)
	go func() { cerr <- consume(cctx, cfg, cnt, hist, ready, &since, &warmed) }()
	select {
	case <-ready:
	case err := <-cerr:
		return err
	}
	if cfg.Warmup > 0 {
		// Everything sent now is warm-up; then wait (bounded) for the
		// consumer to have seen it.
		since.Store(math.MaxInt64)
		wcfg := cfg
		wcfg.Count, wcfg.Duration = cfg.Warmup, 0
		var wcnt counters
		if err := produce(ctx, wcfg, &wcnt, &ignored, false); err != nil {
			cancel()
			<-cerr
			return err
		}
		wait, wcancel := context.WithTimeout(ctx, 10*time.Second)
		for warmed.Load() < wcnt.sent.Load() && wait.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		wcancel()
		since.Store(time.Now().UnixNano())
	}
	err = produce(ctx, cfg, cnt, &ignored, false)
	cnt.lastSend.Store(time.Now().UnixNano())
	cnt.sending.Store(false)
	if err != nil {
		cancel()
		<-cerr
		return err
	}
	// Wait for the consumer to catch up, bounded by ctx and by the
	// consumer's idle stop (no arrival for cfg.Idle).
	for cnt.received.Load() < cnt.sent.Load() && ctx.Err() == nil && !cnt.idle.Load() {
		select {
		case err := <-cerr:
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	return <-cerr
}
