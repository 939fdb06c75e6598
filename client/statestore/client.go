package statestore

import (
	"bufio"
	"context"
	"crypto/rand"

	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/statestore"
)

// Options configures a Client.
type Options struct {
	// Addr is the MQTT server's TCP address (required).
	Addr string
	// ClientID is the MQTT client id (required); KEYNOTIFY registrations
	// belong to it.
	ClientID string
	// Timeout bounds a request whose context has no deadline (default
	// 10 s); it is also the request's message expiry (whole seconds).
	Timeout time.Duration
	// Notifications is the capacity of the Notifications channel (default
	// 1024); when it is full further notifications are dropped.
	Notifications int
	Logger        *slog.Logger
}

// Validate reports the first invalid field.
func (o *Options) Validate() error {
	if o.Addr == "" || o.ClientID == "" {
		return fmt.Errorf("%w: Addr and ClientID are required", ErrBadOptions)
	}
	if o.Timeout < 0 || o.Notifications < 0 {
		return fmt.Errorf("%w: negative option", ErrBadOptions)
	}
	return nil
}

// Notification is one key change pushed by the state store.
type Notification struct {
	Key     []byte
	Op      statestore.Op
	Value   []byte // OpSet only
	Version statestore.HLC
}

// Client is a state store client over MQTT 5 (paho.golang): SET, GET,
// DEL, VDEL and KEYNOTIFY as RPCs on statestore.RequestTopic, responses on
// its own response topic, notifications on the notify topics (pushed into
// its session by the server). Safe for concurrent use.
type Client struct {
	opts     Options
	log      *slog.Logger
	pc       *paho.Client
	respTopy string
	notify   chan Notification

	mu      sync.Mutex
	pending map[string]chan *paho.Publish // correlation data -> waiter; protected by mu
	last    statestore.HLC                // newest clock value sent or seen; protected by mu
	node    string

	closeOnce sync.Once
}

// Dial connects to the MQTT server and subscribes to the response topic.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Notifications == 0 {
		opts.Notifications = 1024
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("statestore: dial %s: %w", opts.Addr, err)
	}
	c := &Client{opts: opts, log: lg, notify: make(chan Notification, opts.Notifications),
		pending: map[string]chan *paho.Publish{},
		// Node ids may not hold ':'.
		node:     strings.ReplaceAll(opts.ClientID, ":", "_"),
		respTopy: "clients/" + opts.ClientID + "/services/statestore/_any_/command/invoke/response"}
	c.pc = paho.NewClient(paho.ClientConfig{ClientID: opts.ClientID, Conn: &bufConn{Conn: nc, r: bufio.NewReaderSize(nc, 16<<10)},
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){c.onPublish}})
	ack, err := c.pc.Connect(ctx, &paho.Connect{ClientID: opts.ClientID, CleanStart: true, KeepAlive: 30})
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("statestore: connect: %w", err)
	}
	if ack.ReasonCode != 0 {
		_ = nc.Close()
		return nil, fmt.Errorf("statestore: connect refused: reason %#x", ack.ReasonCode)
	}
	sa, err := c.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: c.respTopy, QoS: 1, NoLocal: true}}})
	if err != nil || len(sa.Reasons) != 1 || sa.Reasons[0] > 2 {
		_ = c.Close()
		return nil, fmt.Errorf("statestore: subscribe %s: %v %v", c.respTopy, err, sa)
	}
	return c, nil
}

// bufConn buffers reads: paho reads packets a few bytes at a time.
//
// It is also a sync.Locker, and that matters: paho writes a packet as
// several buffers and keeps them together only on a *net.TCPConn (one
// writev) or on a connection it can Lock. Without the lock its pinger's
// PINGREQ, sent right after CONNACK, could land between the buffers of a
// SUBSCRIBE, and the server rightly closes such a malformed stream.
type bufConn struct {
	net.Conn
	r  *bufio.Reader
	mu sync.Mutex
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Lock and Unlock make paho hold the connection for each whole packet.
func (b *bufConn) Lock()   { b.mu.Lock() }
func (b *bufConn) Unlock() { b.mu.Unlock() }

// Close disconnects. It is idempotent.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.pc.Disconnect(&paho.Disconnect{})
	})
	return err
}

// Notifications returns the channel of KEYNOTIFY notifications.
func (c *Client) Notifications() <-chan Notification { return c.notify }

func (c *Client) onPublish(pr paho.PublishReceived) (bool, error) {
	p := pr.Packet
	if p.Topic == c.respTopy {
		if p.Properties == nil {
			return true, nil
		}
		c.mu.Lock()
		ch := c.pending[string(p.Properties.CorrelationData)]
		delete(c.pending, string(p.Properties.CorrelationData))
		c.mu.Unlock()
		if ch != nil {
			ch <- p
		}
		return true, nil
	}
	if strings.HasPrefix(p.Topic, statestore.NotifyTopicPrefix+"/") {
		op, val, err := statestore.ParseNotification(p.Payload)
		if err != nil {
			c.log.Warn("statestore: bad notification", "topic", p.Topic, "err", err)
			return true, nil
		}
		n := Notification{Op: op, Value: val}
		if i := strings.LastIndexByte(p.Topic, '/'); i >= 0 {
			n.Key = hexDecode(p.Topic[i+1:])
		}
		if p.Properties != nil {
			if v, err := statestore.ParseHLC(p.Properties.User.Get(statestore.PropTimestamp)); err == nil {
				n.Version = v
				c.observe(v)
			}
		}
		select {
		case c.notify <- n:
		default:
			c.log.Warn("statestore: notification channel full, dropped", "key", string(n.Key))
		}
	}
	return true, nil
}

func hexDecode(s string) []byte {
	if len(s)%2 != 0 {
		return nil
	}
	out := make([]byte, len(s)/2)
	for i := range out {
		v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil
		}
		out[i] = byte(v)
	}
	return out
}

// tick returns the next local clock value (the request's __ts).
func (c *Client) tick() statestore.HLC {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixMilli()
	if now > c.last.Wall {
		c.last = statestore.HLC{Wall: now, Node: c.node}
	} else {
		c.last = statestore.HLC{Wall: c.last.Wall, Counter: c.last.Counter + 1, Node: c.node}
	}
	return c.last
}

// observe merges a clock value seen from the server.
func (c *Client) observe(v statestore.HLC) {
	c.mu.Lock()
	if v.Wall > c.last.Wall || v.Wall == c.last.Wall && v.Counter > c.last.Counter {
		c.last = statestore.HLC{Wall: v.Wall, Counter: v.Counter, Node: c.node}
	}
	c.mu.Unlock()
}

// Response is a decoded state store response.
type Response struct {
	Value   statestore.Value
	Version statestore.HLC // zero when the response carried no __ts
}

// Do sends one request (args as RESP bulk strings) with an optional
// fencing token and returns the decoded reply. A service error in the
// payload is returned as the statestore.ServiceError (errors.Is works),
// wrapped in ErrDiskFull when the server's full disk refused the write;
// a non-200 status as ErrStatus.
func (c *Client) Do(ctx context.Context, fencing statestore.HLC, args ...[]byte) (Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	corr := make([]byte, 16)
	_, _ = rand.Read(corr)
	corr[6] = corr[6]&0x0f | 0x40 // UUID v4
	corr[8] = corr[8]&0x3f | 0x80
	ch := make(chan *paho.Publish, 1)
	c.mu.Lock()
	c.pending[string(corr)] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, string(corr))
		c.mu.Unlock()
	}()
	exp := uint32((c.opts.Timeout + time.Second - 1) / time.Second)
	props := &paho.PublishProperties{ResponseTopic: c.respTopy, CorrelationData: corr,
		ContentType: statestore.ContentType, MessageExpiry: &exp,
		User: paho.UserProperties{
			{Key: statestore.PropTimestamp, Value: c.tick().String()},
			{Key: statestore.PropProtocolVersion, Value: statestore.ProtocolVersion},
			{Key: statestore.PropSourceID, Value: c.opts.ClientID},
		}}
	if !fencing.IsZero() {
		props.User = append(props.User, paho.UserProperty{Key: statestore.PropFencingToken, Value: fencing.String()})
	}
	pb, err := c.pc.Publish(ctx, &paho.Publish{Topic: statestore.RequestTopic, QoS: 1,
		Payload: statestore.AppendRequest(nil, args...), Properties: props})
	if err != nil {
		return Response{}, fmt.Errorf("statestore: publish: %w", err)
	}
	if pb != nil && pb.ReasonCode >= 0x80 {
		return Response{}, fmt.Errorf("statestore: request refused: reason %#x", pb.ReasonCode)
	}
	var p *paho.Publish
	select {
	case p = <-ch:
	case <-ctx.Done():
		return Response{}, fmt.Errorf("statestore: waiting for response: %w", ctx.Err())
	}
	st := p.Properties.User.Get(statestore.PropStatus)
	if st != statestore.Status200 {
		return Response{}, fmt.Errorf("%w %s: %s", ErrStatus, st, p.Properties.User.Get(statestore.PropStatusMessage))
	}
	var r Response
	if ts := p.Properties.User.Get(statestore.PropTimestamp); ts != "" {
		if r.Version, err = statestore.ParseHLC(ts); err != nil {
			return Response{}, fmt.Errorf("statestore: response __ts: %w", err)
		}
		c.observe(r.Version)
	}
	if r.Value, err = statestore.DecodeReply(p.Payload); err != nil {
		return Response{}, fmt.Errorf("statestore: reply: %w", err)
	}
	if err := r.Value.Err(); err != nil {
		if p.Properties.User.Get(statestore.PropRefusal) == statestore.RefusalDiskFull {
			return r, fmt.Errorf("%w: %w", ErrDiskFull, err)
		}
		return r, err
	}
	return r, nil
}

// SetOptions are the options of Set.
type SetOptions struct {
	Cond         statestore.Condition // CondNone, CondNX, CondNEX
	Expiry       time.Duration        // PX in whole milliseconds; 0 = never
	FencingToken statestore.HLC       // __ft; zero = none
}

// Set stores value under key. applied is false when an NX/NEX condition
// failed; version is the new version (or the key's current one).
func (c *Client) Set(ctx context.Context, key, value []byte, o SetOptions) (applied bool, version statestore.HLC, err error) {
	args := [][]byte{[]byte("SET"), key, value}
	switch o.Cond {
	case statestore.CondNX:
		args = append(args, []byte("NX"))
	case statestore.CondNEX:
		args = append(args, []byte("NEX"))
	}
	if ms := o.Expiry.Milliseconds(); ms > 0 {
		args = append(args, []byte("PX"), []byte(strconv.FormatInt(ms, 10)))
	}
	r, err := c.Do(ctx, o.FencingToken, args...)
	if err != nil {
		return false, r.Version, err
	}
	return r.Value.Kind == statestore.KindSimple, r.Version, nil
}

// Get returns key's value and version; ok is false when the key is absent.
func (c *Client) Get(ctx context.Context, key []byte) (value []byte, version statestore.HLC, ok bool, err error) {
	r, err := c.Do(ctx, statestore.HLC{}, []byte("GET"), key)
	if err != nil {
		return nil, statestore.HLC{}, false, err
	}
	if r.Value.Kind != statestore.KindBulk {
		return nil, r.Version, false, nil
	}
	return append([]byte(nil), r.Value.Str...), r.Version, true, nil
}

// Del deletes key: 1 deleted, 0 absent.
func (c *Client) Del(ctx context.Context, key []byte, fencing statestore.HLC) (int64, error) {
	r, err := c.Do(ctx, fencing, []byte("DEL"), key)
	return r.Value.Int, err
}

// VDel deletes key if it holds value: 1 deleted, 0 absent, -1 value differs.
func (c *Client) VDel(ctx context.Context, key, value []byte, fencing statestore.HLC) (int64, error) {
	r, err := c.Do(ctx, fencing, []byte("VDEL"), key, value)
	return r.Value.Int, err
}

// KeyNotify registers for notifications of key's changes; stop removes
// the registration.
func (c *Client) KeyNotify(ctx context.Context, key []byte, stop bool) error {
	args := [][]byte{[]byte("KEYNOTIFY"), key}
	if stop {
		args = append(args, []byte("STOP"))
	}
	_, err := c.Do(ctx, statestore.HLC{}, args...)
	return err
}

// Lock is a lease held on a key: SET key holder NEX PX ttl. Its Token
// (the version the SET returned) is the fencing token for writes to the
// resources the lock protects.
type Lock struct {
	c      *Client
	Key    []byte
	Holder []byte
	Token  statestore.HLC
}

// Acquire takes the lock key for holder for ttl (re-acquiring a lock the
// holder already has renews it). It returns ErrNotLocked when another
// holder has it.
func (c *Client) Acquire(ctx context.Context, key, holder []byte, ttl time.Duration) (*Lock, error) {
	applied, v, err := c.Set(ctx, key, holder, SetOptions{Cond: statestore.CondNEX, Expiry: ttl})
	if err != nil {
		return nil, err
	}
	if !applied {
		return nil, ErrNotLocked
	}
	return &Lock{c: c, Key: key, Holder: holder, Token: v}, nil
}

// Release deletes the lock if holder still has it (VDEL key holder). It
// returns ErrNotLocked when the lock had expired or passed to another
// holder.
func (l *Lock) Release(ctx context.Context) error {
	n, err := l.c.VDel(ctx, l.Key, l.Holder, statestore.HLC{})
	if err != nil {
		return err
	}
	if n != 1 {
		return ErrNotLocked
	}
	return nil
}
