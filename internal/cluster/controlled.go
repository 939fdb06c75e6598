package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/controller"
	"github.com/smartgo/smartgo/registry"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/ha"
)

// CtlOptions configure a Controlled cluster: registries, controller
// replicas and one broker group whose master the controller elects.
type CtlOptions struct {
	// Dir holds every store and the controllers' Raft state (required).
	Dir string
	// Registries, Controllers and GroupSize are the counts (defaults 1, 1
	// and 3: a master and two slaves).
	Registries  int
	Controllers int
	GroupSize   int
	// Sync makes the master acknowledge once the sync state set has a
	// message (sync_master); MinInSync is broker.MinInSyncReplicas.
	Sync      bool
	MinInSync int
	// Broker and Controller, if set, adjust the options of broker j and
	// controller replica k.
	Broker     func(j int, o *broker.Options)
	Controller func(k int, o *controller.Options)
	Logger     *slog.Logger
}

// Controlled is a running controller-mode cluster on loopback.
type Controlled struct {
	opts CtlOptions

	mu         sync.Mutex
	regs       []*registry.Server
	regAddrs   []string
	ctls       []*controller.Controller // protected by mu; nil when stopped
	ctlOpts    []controller.Options
	brokers    []*broker.Broker // protected by mu; nil when stopped
	brokerOpts []broker.Options
}

// StartControlled starts registries, controllers and the broker group,
// and waits until the group has a master.
func StartControlled(ctx context.Context, opts CtlOptions) (*Controlled, error) {
	if opts.Dir == "" {
		return nil, errors.New("cluster: Dir is required")
	}
	opts.Registries = max(opts.Registries, 1)
	opts.Controllers = max(opts.Controllers, 1)
	if opts.GroupSize <= 0 {
		opts.GroupSize = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Controlled{opts: opts}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	for range opts.Registries {
		r, err := startRegistry(ctx, "127.0.0.1:0", opts.Logger)
		if err != nil {
			return nil, err
		}
		c.regs = append(c.regs, r)
		c.regAddrs = append(c.regAddrs, r.Addr().String())
	}
	// Controller replicas need each other's addresses up front.
	var peers []controller.Peer
	var lns []net.Listener
	for range opts.Controllers * 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		lns = append(lns, ln)
	}
	for k := range opts.Controllers {
		peers = append(peers, controller.Peer{Addr: lns[2*k].Addr().String(), RaftAddr: lns[2*k+1].Addr().String()})
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	for k, p := range peers {
		o := controller.Options{Addr: p.Addr, Advertise: p.Addr, RaftAddr: p.RaftAddr, Dir: filepath.Join(opts.Dir, "controller-"+strconv.Itoa(k)),
			HeartbeatInterval: 200 * time.Millisecond, HeartbeatTimeout: time.Second, ElectionTimeout: 300 * time.Millisecond,
			Logger: opts.Logger.With("controller", k)}
		if opts.Controllers > 1 {
			o.Peers = peers
		}
		if opts.Controller != nil {
			opts.Controller(k, &o)
		}
		c.ctlOpts = append(c.ctlOpts, o)
		c.ctls = append(c.ctls, nil)
		if err := c.StartController(k); err != nil {
			return nil, err
		}
	}
	for j := range opts.GroupSize {
		so := store.DefaultOptions(filepath.Join(opts.Dir, "broker-"+strconv.Itoa(j)))
		so.SegmentSize, so.CQEntriesPerFile, so.IndexSlots, so.IndexEntries = 4<<20, 10000, 10000, 40000
		so.MaxMessageSize, so.WarmSegments = 1<<20, false
		o := broker.Options{BrokerName: "broker-a", ClusterName: "TestCluster", ListenAddr: "127.0.0.1:0", HAListen: "127.0.0.1:0",
			AdvertiseIP: "127.0.0.1", Registries: append([]string(nil), c.regAddrs...), Controllers: c.ControllerAddrs(),
			AutoCreateTopic: true, AutoCreateGroup: true, LongPolling: true, Store: so, SlaveSyncInterval: 500 * time.Millisecond,
			MinInSyncReplicas: opts.MinInSync, SyncLagMax: 2 * time.Second, Logger: opts.Logger.With("b", j),
			HA: ha.Options{HeartbeatInterval: 200 * time.Millisecond, IdleTimeout: 3 * time.Second,
				ReconnectMin: 50 * time.Millisecond, ReconnectMax: 300 * time.Millisecond}}
		if opts.Sync {
			o.Role = broker.RoleSyncMaster
		}
		if opts.Broker != nil {
			opts.Broker(j, &o)
		}
		b, err := broker.New(o)
		if err != nil {
			return nil, fmt.Errorf("cluster: broker %d: %w", j, err)
		}
		o.ListenAddr, o.HAListen = b.Addr(), b.HAAddr()
		c.brokerOpts = append(c.brokerOpts, o)
		c.brokers = append(c.brokers, b)
	}
	if _, err := c.WaitMaster(ctx, -1); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// RegistryAddrs returns the registries' addresses.
func (c *Controlled) RegistryAddrs() []string { return append([]string(nil), c.regAddrs...) }

// ControllerAddrs returns the controller replicas' addresses.
func (c *Controlled) ControllerAddrs() []string {
	var out []string
	for _, o := range c.ctlOpts {
		out = append(out, o.Advertise)
	}
	return out
}

// Broker returns broker j, or nil while it is stopped.
func (c *Controlled) Broker(j int) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[j]
}

// BrokerAddr returns broker j's address.
func (c *Controlled) BrokerAddr(j int) string { return c.brokerOpts[j].ListenAddr }

// Controller returns replica k, or nil while it is stopped.
func (c *Controlled) Controller(k int) *controller.Controller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctls[k]
}

// Master returns the broker acting as master with a valid lease.
func (c *Controlled) Master() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, b := range c.brokers {
		if b == nil {
			continue
		}
		if _, _, m, _ := b.ControllerState(); m {
			return j, true
		}
	}
	return -1, false
}

// WaitMaster waits until a broker other than not acts as master and
// every registry names it as the group's master.
func (c *Controlled) WaitMaster(ctx context.Context, not int) (int, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
	}
	for {
		if j, ok := c.Master(); ok && j != not {
			registered := true
			for _, r := range c.regAddrs {
				if rawMasterAddr(r, c.brokerOpts[j].BrokerName) != c.BrokerAddr(j) {
					registered = false
				}
			}
			if registered {
				return j, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("cluster: no master: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StopBroker closes broker j.
func (c *Controlled) StopBroker(j int) error {
	c.mu.Lock()
	b := c.brokers[j]
	c.brokers[j] = nil
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.Close()
}

// StartBroker restarts broker j on its address and data.
func (c *Controlled) StartBroker(j int) error {
	var err error
	for range 50 {
		var b *broker.Broker
		if b, err = broker.New(c.brokerOpts[j]); err == nil {
			c.mu.Lock()
			c.brokers[j] = b
			c.mu.Unlock()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster: restart broker %d: %w", j, err)
}

// StopController closes replica k.
func (c *Controlled) StopController(k int) error {
	c.mu.Lock()
	ctl := c.ctls[k]
	c.ctls[k] = nil
	c.mu.Unlock()
	if ctl == nil {
		return nil
	}
	return ctl.Close()
}

// StartController (re)starts replica k on its addresses and data.
func (c *Controlled) StartController(k int) error {
	var err error
	for range 50 {
		var ctl *controller.Controller
		if ctl, err = controller.New(c.ctlOpts[k]); err == nil {
			c.mu.Lock()
			c.ctls[k] = ctl
			c.mu.Unlock()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster: start controller %d: %w", k, err)
}

// Close stops everything.
func (c *Controlled) Close() error {
	c.mu.Lock()
	brokers, ctls := c.brokers, c.ctls
	c.brokers, c.ctls = make([]*broker.Broker, len(brokers)), make([]*controller.Controller, len(ctls))
	c.mu.Unlock()
	var errs []error
	for _, b := range brokers {
		if b != nil {
			errs = append(errs, b.Close())
		}
	}
	for _, ctl := range ctls {
		if ctl != nil {
			errs = append(errs, ctl.Close())
		}
	}
	for _, r := range c.regs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
