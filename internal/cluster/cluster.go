// Package cluster is an in-process SmartGo cluster for tests and tools:
// N registries and M master brokers (each optionally with one slave) on 127.0.0.1 with free ports, each
// broker registered with every registry, data in a directory of the
// caller's (a test's t.TempDir()). Brokers and registries can be stopped
// and restarted (on the same address and data) to exercise failures.
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
	"github.com/smartgo/smartgo/registry"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/ha"
)

// Options configure a Cluster.
type Options struct {
	// Dir holds every broker's store (required).
	Dir string
	// Registries and Brokers are the counts (defaults 1 and 1).
	Registries int
	Brokers    int
	// SyncFlush makes brokers acknowledge sends after fsync.
	SyncFlush bool
	// SmallFiles uses 4 MiB segments and small consume queue and index
	// files (fast to create); default on unless LargeFiles.
	LargeFiles bool
	// DelayLevels overrides the brokers' delay levels (tests use short
	// ones to see retries quickly).
	DelayLevels []time.Duration
	// NoAutoCreateTopic turns the brokers' topic auto-creation off.
	NoAutoCreateTopic bool
	// TransactionChecks, when set, is the brokers' transaction timeout and
	// check interval (tests see check-backs quickly).
	TransactionChecks time.Duration
	// DiskUsage, if set, is every broker store's disk usage probe (tests
	// simulate a full disk with it without importing broker).
	DiskUsage func(dir string) (float64, error)
	// MemoryResidentBytes, if set, is every broker store's memory-resident
	// window (1: no queue with a message is young, so a group without
	// offsets starts at a queue's max offset, not at 0).
	MemoryResidentBytes int64
	// MaxMessageSize, if set, is every broker store's message (and
	// batch) size limit, for tests that must not import broker.
	MaxMessageSize int
	// FileReservedTime, if set, is every broker store's retention
	// (store.file_reserved_time), for tests that must not import broker.
	FileReservedTime time.Duration
	// Broker, if set, adjusts each broker's options (index i).
	Broker func(i int, o *broker.Options)
	// AdvertiseIP, if set, is the loopback address the brokers register
	// (they listen on 127.0.0.1): a test puts a proxy there on the same
	// port, which every client then goes through.
	AdvertiseIP string
	// Slaves gives every broker group one slave (id 1) replicating from
	// its master over HA; SyncMaster makes the masters sync masters.
	Slaves     bool
	SyncMaster bool
	// Slave, if set, adjusts each slave's options (group index i).
	Slave  func(i int, o *broker.Options)
	Logger *slog.Logger
}

// Cluster is a running set of registries and brokers.
type Cluster struct {
	opts Options

	mu         sync.Mutex
	registries []*registry.Server // protected by mu; nil when stopped
	regAddrs   []string
	brokers    []*broker.Broker // protected by mu; nil when stopped
	brokerOpts []broker.Options
	slaves     []*broker.Broker // protected by mu; nil when stopped (or no slaves)
	slaveOpts  []broker.Options
}

// Start starts the registries, then the brokers (which register at once),
// and waits until every broker is known to every registry.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("cluster: Dir is required")
	}
	if opts.Registries <= 0 {
		opts.Registries = 1
	}
	if opts.Brokers <= 0 {
		opts.Brokers = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{opts: opts}
	for i := 0; i < opts.Registries; i++ {
		r, err := startRegistry(ctx, "127.0.0.1:0", opts.Logger)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		c.registries = append(c.registries, r)
		c.regAddrs = append(c.regAddrs, r.Addr().String())
	}
	for i := 0; i < opts.Brokers; i++ {
		bo := c.defaultBrokerOptions(i)
		c.brokerOpts = append(c.brokerOpts, bo)
		b, err := broker.New(bo)
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("cluster: broker %d: %w", i, err)
		}
		c.brokers = append(c.brokers, b)
		// Restarts reuse the ports.
		c.brokerOpts[i].ListenAddr = b.Addr()
		c.brokerOpts[i].HAListen = b.HAAddr()
	}
	if opts.Slaves {
		for i := 0; i < opts.Brokers; i++ {
			so := c.defaultSlaveOptions(i)
			c.slaveOpts = append(c.slaveOpts, so)
			b, err := broker.New(so)
			if err != nil {
				_ = c.Close()
				return nil, fmt.Errorf("cluster: slave %d: %w", i, err)
			}
			c.slaves = append(c.slaves, b)
			c.slaveOpts[i].ListenAddr = b.Addr()
		}
	}
	if err := c.WaitRegistered(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// defaultSlaveOptions are broker i's options turned into its slave's: id 1,
// its own store directory and port, fast HA timers for tests.
func (c *Cluster) defaultSlaveOptions(i int) broker.Options {
	o := c.defaultBrokerOptions(i)
	o.Role, o.BrokerID = broker.RoleSlave, 1
	o.Store.Root = filepath.Join(c.opts.Dir, "broker-"+strconv.Itoa(i)+"-s")
	o.SlaveSyncInterval = time.Second
	if c.opts.Slave != nil {
		c.opts.Slave(i, &o)
	}
	return o
}

// Slave returns group i's slave, or nil while it is stopped.
func (c *Cluster) Slave(i int) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.slaves) {
		return nil
	}
	return c.slaves[i]
}

// SlaveAddr returns group i's slave address.
func (c *Cluster) SlaveAddr(i int) string { return c.slaveOpts[i].ListenAddr }

// StopSlave closes group i's slave.
func (c *Cluster) StopSlave(i int) error {
	c.mu.Lock()
	b := c.slaves[i]
	c.slaves[i] = nil
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.Close()
}

// StartSlave restarts group i's stopped slave on its old address and data.
func (c *Cluster) StartSlave(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slaves[i] != nil {
		return nil
	}
	var err error
	for try := 0; try < 50; try++ {
		var b *broker.Broker
		if b, err = broker.New(c.slaveOpts[i]); err == nil {
			c.slaves[i] = b
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster: restart slave %d: %w", i, err)
}

// WaitRegistered polls every running registry until it knows every
// running broker's master address.
func (c *Cluster) WaitRegistered(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
	}
	for {
		c.mu.Lock()
		var want []string
		for i, b := range c.brokers {
			if b != nil {
				want = append(want, c.brokerOpts[i].BrokerName)
			}
		}
		var regs []string
		for i, r := range c.registries {
			if r != nil {
				regs = append(regs, c.regAddrs[i])
			}
		}
		c.mu.Unlock()
		ok := true
		for _, r := range regs {
			names := rawBrokerNames(r)
			for _, w := range want {
				if !names[w] {
					ok = false
				}
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: brokers not registered: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func startRegistry(ctx context.Context, addr string, log *slog.Logger) (*registry.Server, error) {
	r, err := registry.New(registry.Options{Addr: addr, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("cluster: registry: %w", err)
	}
	if err := r.Start(ctx); err != nil {
		return nil, fmt.Errorf("cluster: registry: %w", err)
	}
	return r, nil
}

func (c *Cluster) defaultBrokerOptions(i int) broker.Options {
	so := store.DefaultOptions(filepath.Join(c.opts.Dir, "broker-"+strconv.Itoa(i)))
	if !c.opts.LargeFiles {
		so.SegmentSize = 4 << 20
		so.CQEntriesPerFile = 10000
		so.IndexSlots = 10000
		so.IndexEntries = 40000
		so.MaxMessageSize = 1 << 20
		so.WarmSegments = false
	}
	if c.opts.SyncFlush {
		so.FlushMode = store.FlushSync
	}
	o := broker.Options{
		BrokerName: "broker-" + string(rune('a'+i)), ClusterName: "TestCluster", ListenAddr: "127.0.0.1:0",
		AdvertiseIP: "127.0.0.1", Registries: append([]string(nil), c.regAddrs...),
		AutoCreateTopic: !c.opts.NoAutoCreateTopic, AutoCreateGroup: true, LongPolling: true, EnablePropertyFilter: true,
		DelayLevels: c.opts.DelayLevels, Store: so, Logger: c.opts.Logger,
		HA: ha.Options{HeartbeatInterval: 500 * time.Millisecond, IdleTimeout: 3 * time.Second,
			ReconnectMin: 50 * time.Millisecond, ReconnectMax: 500 * time.Millisecond},
	}
	if c.opts.AdvertiseIP != "" {
		o.AdvertiseIP = c.opts.AdvertiseIP
	}
	if c.opts.SyncMaster {
		o.Role = broker.RoleSyncMaster
	}
	if d := c.opts.TransactionChecks; d > 0 {
		o.TransactionTimeout, o.TransactionCheckInterval = d, d
	}
	if c.opts.DiskUsage != nil {
		o.Store.DiskUsage = c.opts.DiskUsage
	}
	if c.opts.MemoryResidentBytes > 0 {
		o.Store.MemoryResidentBytes = c.opts.MemoryResidentBytes
	}
	if c.opts.MaxMessageSize > 0 {
		o.Store.MaxMessageSize = c.opts.MaxMessageSize
	}
	if c.opts.FileReservedTime > 0 {
		o.Store.FileReservedTime = c.opts.FileReservedTime
	}
	if c.opts.Broker != nil {
		c.opts.Broker(i, &o)
	}
	return o
}

// RegistryAddrs returns the registries' addresses.
func (c *Cluster) RegistryAddrs() []string {
	return append([]string(nil), c.regAddrs...)
}

// BrokerAddr returns broker i's address.
func (c *Cluster) BrokerAddr(i int) string { return c.brokerOpts[i].ListenAddr }

// BrokerName returns broker i's name.
func (c *Cluster) BrokerName(i int) string { return c.brokerOpts[i].BrokerName }

// Broker returns broker i, or nil while it is stopped.
func (c *Cluster) Broker(i int) *broker.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[i]
}

// StopBroker closes broker i (it unregisters from the registries).
func (c *Cluster) StopBroker(i int) error {
	c.mu.Lock()
	b := c.brokers[i]
	c.brokers[i] = nil
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.Close()
}

// StartBroker restarts a stopped broker i on its old address and data.
func (c *Cluster) StartBroker(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.brokers[i] != nil {
		return nil
	}
	var err error
	for try := 0; try < 50; try++ { // the port may linger briefly
		var b *broker.Broker
		if b, err = broker.New(c.brokerOpts[i]); err == nil {
			c.brokers[i] = b
			c.mu.Unlock()
			err = c.WaitRegistered(context.Background())
			c.mu.Lock()
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster: restart broker %d: %w", i, err)
}

// StopRegistry closes registry i.
func (c *Cluster) StopRegistry(i int) error {
	c.mu.Lock()
	r := c.registries[i]
	c.registries[i] = nil
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.Close()
}

// WaitRoute polls registry i (any running one when i < 0) until topic has a
// route with at least one queue per running broker, or ctx ends.
func (c *Cluster) WaitRoute(ctx context.Context, topic string) error {
	for {
		if c.routeReady(topic) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: route of %s not ready: %w", topic, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) routeReady(topic string) bool {
	// Brokers register synchronously on topic creation; the check is done
	// by dialing each registry through a tiny raw request.
	for _, addr := range c.regAddrs {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		ok := rawRouteExists(conn, topic)
		_ = conn.Close()
		if ok {
			return true
		}
	}
	return false
}

// Close stops every broker and registry.
func (c *Cluster) Close() error {
	c.mu.Lock()
	brokers, regs, slaves := c.brokers, c.registries, c.slaves
	c.brokers, c.registries = make([]*broker.Broker, len(brokers)), make([]*registry.Server, len(regs))
	c.slaves = make([]*broker.Broker, len(slaves))
	c.mu.Unlock()
	var errs []error
	for _, b := range slaves {
		if b != nil {
			errs = append(errs, b.Close())
		}
	}
	for _, b := range brokers {
		if b != nil {
			errs = append(errs, b.Close())
		}
	}
	for _, r := range regs {
		if r != nil {
			errs = append(errs, r.Close())
		}
	}
	return errors.Join(errs...)
}
