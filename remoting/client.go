package remoting

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Client keeps one connection per server address, dialled on first use and
// again after it closed, and matches responses to requests by opaque.
// Requests that servers send to the client are served by the processors
// registered with Register on a small worker pool.
type Client struct {
	opts ClientOptions
	log  *slog.Logger
	mux  *mux

	mu      sync.Mutex
	conns   map[string]*Conn           // protected by mu
	dialing map[string]*dialing        // protected by mu
	onClose []func(c *Conn, err error) // protected by mu
	// onAddrClose are OnAddrClose's hooks; protected by mu.
	onAddrClose []func(addr string, err error)
	closed      bool // protected by mu

	wg   sync.WaitGroup // connection readers
	once sync.Once
}

type dialing struct {
	done chan struct{}
	conn *Conn
	err  error
}

// NewClient validates opts and returns a client.
func NewClient(opts ClientOptions) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	log := peerLogger(opts.Logger)
	c := &Client{opts: opts, log: log, conns: make(map[string]*Conn), dialing: make(map[string]*dialing)}
	c.mux = newMux(log, func(Pool) PoolOptions { return opts.HandlerPool })
	c.mux.start()
	return c, nil
}

// Register serves requests with code sent by servers (e.g.
// NOTIFY_CONSUMER_IDS_CHANGED) by p.
func (c *Client) Register(code int32, p Processor) {
	c.mux.register(code, PoolDefault, p, RegisterOptions{})
}

// RegisterFunc is Register with a function.
func (c *Client) RegisterFunc(code int32, fn func(c *Conn, req *protocol.Command) (*protocol.Command, error)) {
	c.mux.register(code, PoolDefault, ProcessorFunc(fn), RegisterOptions{})
}

// RegisterInline is Register for a processor that runs on the
// connection's reader (RegisterOptions.Inline): the server's requests
// are then served one at a time in the order they were sent, and in
// order with the responses read between them. p must not block.
func (c *Client) RegisterInline(code int32, p Processor) {
	c.mux.register(code, PoolDefault, p, RegisterOptions{Inline: true})
}

// OnConnClose registers fn to run when any of the client's connections
// closes.
func (c *Client) OnConnClose(fn func(conn *Conn, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onClose = append(c.onClose, fn)
}

// OnAddrClose registers fn to run when any of the client's connections
// closes, with the address it was dialled at (as given to Conn, Invoke).
// Like OnConnClose's, fn runs on the closing connection's goroutine and
// must not block; it applies to the connections dialled after it.
func (c *Client) OnAddrClose(fn func(addr string, err error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onAddrClose = append(c.onAddrClose, fn)
}

// Conn returns the open connection to addr, dialling it if needed.
// Concurrent callers share one dial.
func (c *Client) Conn(ctx context.Context, addr string) (*Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if cn := c.conns[addr]; cn != nil {
		select {
		case <-cn.Done():
			// Closed, and its close hook has not yet removed it: a
			// request made now must not fail on it, dial again.
			delete(c.conns, addr)
		default:
			c.mu.Unlock()
			return cn, nil
		}
	}
	d := c.dialing[addr]
	if d == nil {
		d = &dialing{done: make(chan struct{})}
		c.dialing[addr] = d
		c.mu.Unlock()
		d.conn, d.err = c.dial(ctx, addr)
		c.mu.Lock()
		delete(c.dialing, addr)
		close(d.done)
		c.mu.Unlock()
		return d.conn, d.err
	}
	c.mu.Unlock()
	select {
	case <-d.done:
		return d.conn, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Client) dial(ctx context.Context, addr string) (*Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.DialTimeout)
		defer cancel()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remoting: dial %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	cn := newConn(nc, c.opts.ConnOptions, c.log, c.mux)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = nc.Close()
		return nil, ErrClosed
	}
	c.conns[addr] = cn
	hooks := append([]func(*Conn, error){}, c.onClose...)
	addrHooks := append([]func(string, error){}, c.onAddrClose...)
	cn.start(&c.wg) // under mu: Close cannot be waiting yet
	c.mu.Unlock()
	cn.OnClose(func(cn *Conn, err error) {
		c.mu.Lock()
		if c.conns[addr] == cn {
			delete(c.conns, addr)
		}
		c.mu.Unlock()
		for _, fn := range hooks {
			fn(cn, err)
		}
		for _, fn := range addrHooks {
			fn(addr, err)
		}
	})
	c.log.Debug("remoting: connected", "addr", addr)
	return cn, nil
}

func (c *Client) prepare(req *protocol.Command) {
	req.SerializeType = c.opts.SerializeType
}

// Invoke sends req to addr and waits for the response (see Conn.Invoke).
func (c *Client) Invoke(ctx context.Context, addr string, req *protocol.Command) (*protocol.Command, error) {
	cn, err := c.Conn(ctx, addr)
	if err != nil {
		req.ReleaseBody()
		return nil, err
	}
	c.prepare(req)
	return cn.Invoke(ctx, req)
}

// InvokeAsync sends req to addr; cb receives the response or the error
// (see Conn.InvokeAsync). timeout 0 means RequestTimeout.
func (c *Client) InvokeAsync(ctx context.Context, addr string, req *protocol.Command, timeout time.Duration, cb func(*protocol.Command, error)) error {
	cn, err := c.Conn(ctx, addr)
	if err != nil {
		req.ReleaseBody()
		return err
	}
	c.prepare(req)
	return cn.InvokeAsync(req, timeout, cb)
}

// InvokeOneway sends req to addr with the oneway bit set.
func (c *Client) InvokeOneway(ctx context.Context, addr string, req *protocol.Command) error {
	cn, err := c.Conn(ctx, addr)
	if err != nil {
		req.ReleaseBody()
		return err
	}
	c.prepare(req)
	return cn.Oneway(req)
}

// CloseConn closes the connection to addr, if any; the next call redials.
func (c *Client) CloseConn(addr string) {
	c.mu.Lock()
	cn := c.conns[addr]
	c.mu.Unlock()
	if cn != nil {
		cn.Close()
	}
}

// Close closes every connection (pending calls fail with ErrConnClosed)
// and waits for the client's goroutines. It is idempotent. It must not be
// called from an async callback.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		conns := make([]*Conn, 0, len(c.conns))
		for _, cn := range c.conns {
			conns = append(conns, cn)
		}
		c.mu.Unlock()
		for _, cn := range conns {
			cn.Close()
		}
	})
	c.wg.Wait()
	c.mux.close()
	return nil
}
