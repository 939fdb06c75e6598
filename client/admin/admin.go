// Package admin is SmartGo's administration client: topics, clusters,
// broker statistics, consumer group progress, message lookup and offset
// resets, through the registries and the brokers.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Options configure an Admin.
type Options struct {
	// Registries are the registry addresses, tried in turn (required).
	Registries []string
	// RequestTimeout bounds each request when the context has no earlier
	// deadline. Default 3 s.
	RequestTimeout time.Duration
	// NamePeers: when a request fails as a peer that does not speak
	// RocketMQ remoting makes it fail (timed out, connection closed),
	// look once per address at what answers there (HTTP, MQTT) and say it
	// in the error. For command-line tools, where a wrong port is the
	// likely cause: the look costs up to a few seconds at a hung broker.
	NamePeers bool
	Logger    *slog.Logger
}

// Validate reports the first invalid setting.
func (o *Options) Validate() error {
	if len(o.Registries) == 0 {
		return fmt.Errorf("%w: no registry address", client.ErrBadOptions)
	}
	if o.RequestTimeout < 0 {
		return fmt.Errorf("%w: negative RequestTimeout", client.ErrBadOptions)
	}
	return nil
}

// Admin is an administration client. It is safe for concurrent use.
type Admin struct {
	opts    Options
	rc      *remoting.Client
	regNext atomic.Uint32
	probed  sync.Map // address -> struct{}: looked at once (NamePeers)
}

// New returns an admin client.
func New(opts Options) (*Admin, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 3 * time.Second
	}
	rc, err := remoting.NewClient(remoting.ClientOptions{Logger: opts.Logger,
		ConnOptions: remoting.ConnOptions{RequestTimeout: opts.RequestTimeout}})
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	return &Admin{opts: opts, rc: rc}, nil
}

// Close closes the connections.
func (a *Admin) Close() error { return a.rc.Close() }

func (a *Admin) invoke(ctx context.Context, op, addr string, req *protocol.Command) (*protocol.Command, error) {
	cctx, cancel := context.WithTimeout(ctx, a.opts.RequestTimeout)
	defer cancel()
	resp, err := a.rc.Invoke(cctx, addr, req)
	if err != nil {
		switch {
		case errors.Is(err, remoting.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
			err = fmt.Errorf("%w: admin: %s to %s: %w", client.ErrTimeout, op, addr, err)
		case errors.Is(err, context.Canceled):
			return nil, fmt.Errorf("admin: %s to %s: %w", op, addr, err)
		default:
			err = fmt.Errorf("%w: admin: %s to %s: %w", client.ErrBrokerUnavailable, op, addr, err)
		}
		// An address of another port of SmartGo (the console's, the
		// metrics', the MQTT bridge's) given for a registry's or a
		// broker's: say what answered there.
		if a.opts.NamePeers {
			if _, seen := a.probed.LoadOrStore(addr, struct{}{}); !seen {
				if hint := wrongPortHint(ctx, addr, errors.Is(err, remoting.ErrConnClosed)); hint != "" {
					err = fmt.Errorf("%w (%s)", err, hint)
				}
			}
		}
		return nil, err
	}
	return resp, nil
}

func (a *Admin) invokeOK(ctx context.Context, op, addr string, req *protocol.Command) (*protocol.Command, error) {
	resp, err := a.invoke(ctx, op, addr, req)
	if err != nil {
		return nil, err
	}
	if resp.Code != protocol.Success {
		err := &client.BrokerError{Addr: addr, Op: op, Code: resp.Code, Remark: resp.Remark}
		if resp.Code == protocol.RequestCodeNotSupported && a.isRegistry(ctx, addr) { // a registry's address given as a broker's
			return nil, fmt.Errorf("%w (%s is a registry, not a broker: brokers listen on port 10911 by default; `smartgo admin cluster` lists them)", err, addr)
		}
		if resp.Code == protocol.RequestCodeNotSupported && a.isController(ctx, addr) { // a controller's address given as a broker's
			return nil, fmt.Errorf("%w (%s is a controller replica, not a broker: brokers listen on port 10911 by default; `smartgo admin cluster` lists them)", err, addr)
		}
		return nil, err
	}
	return resp, nil
}

// isRegistry reports, with NamePeers, whether addr answers a registry's
// request (GET_BROKER_CLUSTER_INFO, which brokers do not serve).
func (a *Admin) isRegistry(ctx context.Context, addr string) bool {
	return a.answers(ctx, "registry", "cluster info", addr, protocol.GetBrokerClusterInfo)
}

// isController reports, with NamePeers, whether addr answers as a
// controller replica (CONTROLLER_GET_METADATA).
func (a *Admin) isController(ctx context.Context, addr string) bool {
	return a.answers(ctx, "controller", "controller metadata", addr, protocol.ControllerGetMetadata)
}

// answers reports whether addr serves a request of code with success;
// asked once per kind and address, only when NamePeers.
func (a *Admin) answers(ctx context.Context, kind, op, addr string, code int32) bool {
	if !a.opts.NamePeers {
		return false
	}
	if _, seen := a.probed.LoadOrStore(kind+" "+addr, struct{}{}); seen {
		return false
	}
	resp, err := a.invoke(ctx, op, addr, protocol.NewRequest(code, nil, nil))
	return err == nil && resp.Code == protocol.Success
}

// registry sends a request to the registries in turn until one answers.
func (a *Admin) registry(ctx context.Context, op string, newReq func() *protocol.Command) (*protocol.Command, error) {
	regs := a.opts.Registries
	start := int(a.regNext.Load())
	var errs []error
	for i := range regs {
		idx := (start + i) % len(regs)
		req := newReq()
		resp, err := a.invoke(ctx, op, regs[idx], req)
		if err == nil {
			a.regNext.Store(uint32(idx))
			if resp.Code == protocol.TopicNotExist {
				return nil, fmt.Errorf("%w: %s", client.ErrTopicNotExist, resp.Remark)
			}
			if resp.Code == protocol.RequestCodeNotSupported && everyRegistryServes(req.Code) { // a broker's address given as a registry's
				what := "is not a registry"
				if a.isController(ctx, regs[idx]) {
					what = "is a controller replica, not a registry (`smartgo admin controller -controller " + regs[idx] + "` reads it)"
				}
				return nil, fmt.Errorf("%w (%s %s: registries listen on port 9876 by default, brokers on 10911)",
					&client.BrokerError{Addr: regs[idx], Op: op, Code: resp.Code, Remark: resp.Remark}, regs[idx], what)
			}
			if resp.Code != protocol.Success {
				return nil, &client.BrokerError{Addr: regs[idx], Op: op, Code: resp.Code, Remark: resp.Remark}
			}
			return resp, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: %s: %w", client.ErrRegistryUnavailable, op, errors.Join(errs...))
}

// everyRegistryServes reports whether every RocketMQ name server answers
// requests of this code (SmartGo's and Apache RocketMQ's alike).
func everyRegistryServes(code int32) bool {
	switch code {
	case protocol.GetBrokerClusterInfo, protocol.GetAllTopicListFromNameserver, protocol.GetRouteInfoByTopic:
		return true
	}
	return false
}

// ClusterInfo returns the brokers of every cluster.
func (a *Admin) ClusterInfo(ctx context.Context) (*protocol.ClusterInfo, error) {
	resp, err := a.registry(ctx, "cluster info", func() *protocol.Command {
		return protocol.NewRequest(protocol.GetBrokerClusterInfo, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	var ci protocol.ClusterInfo
	if err := protocol.DecodeJSON(resp.Body, &ci); err != nil {
		return nil, fmt.Errorf("admin: cluster info: %w", err)
	}
	return &ci, nil
}

// ListTopics returns every topic the registries know, sorted.
func (a *Admin) ListTopics(ctx context.Context) ([]string, error) {
	resp, err := a.registry(ctx, "topic list", func() *protocol.Command {
		return protocol.NewRequest(protocol.GetAllTopicListFromNameserver, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	var tl protocol.TopicList
	if err := protocol.DecodeJSON(resp.Body, &tl); err != nil {
		return nil, fmt.Errorf("admin: topic list: %w", err)
	}
	sort.Strings(tl.TopicList)
	return tl.TopicList, nil
}

// TopicRoute returns a topic's route.
func (a *Admin) TopicRoute(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	resp, err := a.registry(ctx, "route", func() *protocol.Command {
		return protocol.NewRequest(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic, AcceptStandardJSONOnly: true}, nil)
	})
	if err != nil {
		return nil, err
	}
	var rd protocol.TopicRouteData
	if err := protocol.DecodeJSON(resp.Body, &rd); err != nil {
		return nil, fmt.Errorf("admin: route: %w", err)
	}
	return &rd, nil
}

// Broker is one master broker.
type Broker struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
	Addr    string `json:"addr"`
}

// Masters returns the master brokers of a cluster ("" = every cluster).
func (a *Admin) Masters(ctx context.Context, cluster string) ([]Broker, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	var out []Broker
	for cl, names := range ci.ClusterAddrTable {
		if cluster != "" && cl != cluster {
			continue
		}
		for _, n := range names {
			if bd := ci.BrokerAddrTable[n]; bd != nil && bd.MasterAddr() != "" {
				out = append(out, Broker{Cluster: cl, Name: n, Addr: bd.MasterAddr()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		if cluster == "" {
			return nil, fmt.Errorf("%w: no master broker in any cluster (none registered, or a failover in progress)", client.ErrNoRoute)
		}
		if _, ok := ci.ClusterAddrTable[cluster]; !ok {
			// A typo in -cluster: name the clusters there are.
			known := strings.Join(slices.Sorted(maps.Keys(ci.ClusterAddrTable)), ", ")
			if known == "" {
				known = "none"
			}
			return nil, fmt.Errorf("%w: no master broker in cluster %q: the registries know no such cluster (they know %s)",
				client.ErrNoRoute, cluster, known)
		}
		return nil, fmt.Errorf("%w: no master broker in cluster %q", client.ErrNoRoute, cluster)
	}
	return out, nil
}

// Defaults and bounds of a topic CreateTopic makes: the CLI's flags and
// the console's API take theirs from these.
const (
	DefaultTopicQueues = 8
	DefaultTopicPerm   = protocol.PermRead | protocol.PermWrite // 6
	// MaxTopicQueues bounds the queue counts the CLI and console accept
	// (a typo such as 80000 queues is refused before any broker sees it).
	MaxTopicQueues = 1024
)

// TopicConfig is what CreateTopic sets.
type TopicConfig struct {
	Name        string
	ReadQueues  int32 // default DefaultTopicQueues
	WriteQueues int32 // default DefaultTopicQueues
	Perm        int32 // default DefaultTopicPerm
	Order       bool
}

// topicKnown reports whether a registry routes topic or one of masters
// has it (asked all at once); a master that does not answer counts as
// knowing it when silentKnows.
func (a *Admin) topicKnown(ctx context.Context, masters []Broker, topic string, silentKnows bool) bool {
	if _, err := a.TopicRoute(ctx, topic); !errors.Is(err, client.ErrTopicNotExist) {
		return true
	}
	known := false
	err := a.fromEach(ctx, "topic stats", masters, func() *protocol.Command {
		return protocol.NewRequest(protocol.GetTopicStatsInfo, &protocol.TopicHeader{Topic: topic}, nil)
	}, func(b Broker, resp *protocol.Command) error {
		if err := okAnswer("topic stats", b.Addr, resp); !errors.Is(err, client.ErrTopicNotExist) {
			known = true
		}
		return nil
	})
	return known || err != nil && silentKnows
}

// TopicExists reports whether a registry routes topic or a master of
// cluster ("" = all) has it (a topic just created may not be routed yet).
// Masters that do not answer are left out: the topic is new when no
// registry and none of those that answered has it.
func (a *Admin) TopicExists(ctx context.Context, cluster, topic string) (bool, error) {
	if err := client.ValidateTopic(topic); err != nil {
		return false, fmt.Errorf("admin: look up topic: %w", err)
	}
	masters, err := a.Masters(ctx, cluster)
	if err != nil {
		return false, err
	}
	return a.topicKnown(ctx, masters, topic, false), nil
}

// CreateTopic creates or updates a topic on every master of cluster (""
// = all, asked all at once); the brokers then register it with the
// registries. When some masters do not answer (dead, hung, unreachable),
// the others have the topic and the error is ErrPartial, naming the
// silent ones (Answered lists the others); when none answers, their
// errors joined.
func (a *Admin) CreateTopic(ctx context.Context, cluster string, tc TopicConfig) error {
	if err := client.ValidateTopic(tc.Name); err != nil {
		return fmt.Errorf("admin: create topic: %w", err)
	}
	masters, err := a.Masters(ctx, cluster)
	if err != nil {
		return err
	}
	return a.CreateTopicOn(ctx, masters, tc)
}

// CreateTopicOn is CreateTopic on the given masters only (some of those
// Masters returns): a topic that lives on one broker group.
func (a *Admin) CreateTopicOn(ctx context.Context, masters []Broker, tc TopicConfig) error {
	if err := client.ValidateTopic(tc.Name); err != nil {
		return fmt.Errorf("admin: create topic: %w", err)
	}
	if len(masters) == 0 {
		return fmt.Errorf("%w: create topic %s: no broker given", client.ErrBadOptions, tc.Name)
	}
	if tc.ReadQueues == 0 {
		tc.ReadQueues = DefaultTopicQueues
	}
	if tc.WriteQueues == 0 {
		tc.WriteQueues = DefaultTopicQueues
	}
	if tc.Perm == 0 {
		tc.Perm = DefaultTopicPerm
	}
	return a.fromEach(ctx, "create topic", masters, func() *protocol.Command {
		h := &protocol.CreateTopicRequestHeader{Topic: tc.Name, DefaultTopic: protocol.DefaultTopic, ReadQueueNums: tc.ReadQueues,
			WriteQueueNums: tc.WriteQueues, Perm: tc.Perm, TopicFilterType: protocol.TopicFilterSingleTag, Order: tc.Order}
		return protocol.NewRequest(protocol.UpdateAndCreateTopic, h, nil)
	}, func(b Broker, resp *protocol.Command) error { return okAnswer("create topic", b.Addr, resp) })
}

// DeleteTopic deletes a topic from every master of cluster (asked all at
// once) and then from every registry. A topic that no registry and none
// of those masters knows is client.ErrTopicNotExist (the brokers, as
// Java's, answer a delete of a missing topic with success). When some
// masters do not answer, the others have deleted it and the error is
// ErrPartial naming the silent ones (Answered lists the others); the
// registries are left alone then: they keep routing the topic to the
// silent masters, which still have it.
func (a *Admin) DeleteTopic(ctx context.Context, cluster, topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic name", client.ErrBadOptions)
	}
	masters, err := a.Masters(ctx, cluster)
	if err != nil {
		return err
	}
	if !a.topicKnown(ctx, masters, topic, true) {
		return fmt.Errorf("%w: %s (no registry and no master knows it)", client.ErrTopicNotExist, topic)
	}
	if err := a.fromEach(ctx, "delete topic", masters, func() *protocol.Command {
		return protocol.NewRequest(protocol.DeleteTopicInBroker, &protocol.DeleteTopicRequestHeader{Topic: topic}, nil)
	}, func(b Broker, resp *protocol.Command) error { return okAnswer("delete topic", b.Addr, resp) }); err != nil {
		return err // the route stays while a broker keeps the topic
	}
	var errs []error
	for _, r := range a.opts.Registries {
		if _, err := a.invokeOK(ctx, "delete topic in registry", r, protocol.NewRequest(protocol.DeleteTopicInNamesrv,
			&protocol.DeleteTopicInNamesrvRequestHeader{Topic: topic, ClusterName: cluster}, nil)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// QueueStat is one queue's offsets.
type QueueStat struct {
	Queue          client.MessageQueue `json:"queue"`
	MinOffset      int64               `json:"minOffset"`
	MaxOffset      int64               `json:"maxOffset"`
	LastUpdateTime int64               `json:"lastUpdateTimestamp"`
}

// HiddenWarnings says, one line per broker group, which queues of stats
// (a topic's, taken before an update to readQueues read queues) hold
// messages no consumer reads while the topic has that few read queues:
// they stay stored, and more read queues read them again. Nil when none.
func HiddenWarnings(topic string, stats []QueueStat, readQueues int) []string {
	held := map[string]int64{}
	for _, qs := range stats {
		if int(qs.Queue.QueueID) >= readQueues && qs.MaxOffset > qs.MinOffset {
			held[qs.Queue.BrokerName] += qs.MaxOffset - qs.MinOffset
		}
	}
	var out []string
	for _, b := range slices.Sorted(maps.Keys(held)) {
		out = append(out, fmt.Sprintf("%s's queues %d and above of %s hold %d messages that no consumer reads with %d read queues "+
			"(they stay stored: more read queues read them again); to shrink a topic, lower its write queues first and its read queues "+
			"once its consumers have drained those queues", b, readQueues, topic, held[b], readQueues))
	}
	return out
}

// TopicStats returns every queue's offsets on every master of the topic
// (a broker group without master is left out: the MQTT bridge positions
// its consumers on these).
func (a *Admin) TopicStats(ctx context.Context, topic string) ([]QueueStat, error) {
	st, err := a.topicStats(ctx, topic, (*protocol.BrokerData).MasterAddr)
	if err != nil {
		return nil, err // every broker group or none: the bridge builds on it
	}
	return st, nil
}

// QueueStats returns every queue's offsets on every broker group of the
// topic, read from its master or, while it has none, from its slave (see
// Readers): what an operator looks at, also after a master died. Broker
// groups that do not answer leave their queues out: the answer then comes
// with an ErrPartial error naming them (an error alone when none
// answered).
func (a *Admin) QueueStats(ctx context.Context, topic string) ([]QueueStat, error) {
	return a.topicStats(ctx, topic, readAddr)
}

// topicStats asks GET_TOPIC_STATS_INFO of the broker addrOf names in each
// broker group of the topic ("": none), all at once; see fromEach for the
// error.
func (a *Admin) topicStats(ctx context.Context, topic string, addrOf func(*protocol.BrokerData) string) ([]QueueStat, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	var bs []Broker
	for _, bd := range rd.BrokerDatas {
		if addr := addrOf(bd); addr != "" {
			bs = append(bs, Broker{Cluster: bd.Cluster, Name: bd.BrokerName, Addr: addr})
		}
	}
	var out []QueueStat
	perr := a.fromEach(ctx, "topic stats", bs, func() *protocol.Command {
		return protocol.NewRequest(protocol.GetTopicStatsInfo, &protocol.TopicHeader{Topic: topic}, nil)
	}, func(b Broker, resp *protocol.Command) error {
		if err := okAnswer("topic stats", b.Addr, resp); err != nil {
			return err
		}
		var ts protocol.TopicStatsTable
		if err := protocol.DecodeJSON(resp.Body, &ts); err != nil {
			return fmt.Errorf("admin: topic stats of %s: %w", b.Name, err)
		}
		for _, e := range ts.OffsetTable {
			out = append(out, QueueStat{Queue: e.Queue, MinOffset: e.Value.MinOffset, MaxOffset: e.Value.MaxOffset, LastUpdateTime: e.Value.LastUpdateTimestamp})
		}
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	return out, perr
}

// BrokerRuntimeInfo returns a broker's runtime statistics table.
func (a *Admin) BrokerRuntimeInfo(ctx context.Context, addr string) (map[string]string, error) {
	resp, err := a.invokeOK(ctx, "runtime info", addr, protocol.NewRequest(protocol.GetBrokerRuntimeInfo, nil, nil))
	if err != nil {
		return nil, err
	}
	var kv protocol.KVTable
	if err := protocol.DecodeJSON(resp.Body, &kv); err != nil {
		return nil, fmt.Errorf("admin: runtime info: %w", err)
	}
	return kv.Table, nil
}

// GroupProgress returns a consumer group's committed offset and lag per
// queue (GET_CONSUME_STATS to every broker group's master, or to its slave
// while it has none: see Readers), for one topic or all (""). A group that
// no broker group knows is client.ErrGroupNotExist; broker groups that do
// not answer make it ErrPartial, with the progress the others returned.
func (a *Admin) GroupProgress(ctx context.Context, group, topic string) ([]QueueProgress, error) {
	readers, err := a.Readers(ctx)
	if err != nil {
		return nil, err
	}
	var out []QueueProgress
	unknown := 0
	perr := a.fromEach(ctx, "consume stats", readers, func() *protocol.Command {
		return protocol.NewRequest(protocol.GetConsumeStats, &protocol.GetConsumeStatsRequestHeader{ConsumerGroup: group, Topic: topic}, nil)
	}, func(m Broker, resp *protocol.Command) error {
		if err := okAnswer("consume stats", m.Addr, resp); err != nil {
			if errors.Is(err, client.ErrGroupNotExist) {
				unknown++
				return nil
			}
			if errors.Is(err, client.ErrTopicNotExist) {
				return nil
			}
			return err
		}
		var cs protocol.ConsumeStats
		if err := protocol.DecodeJSON(resp.Body, &cs); err != nil {
			return fmt.Errorf("admin: consume stats: %w", err)
		}
		for _, e := range cs.OffsetTable {
			out = append(out, QueueProgress{Queue: e.Queue, BrokerOffset: e.Value.BrokerOffset, ConsumerOffset: e.Value.ConsumerOffset,
				Lag: max(e.Value.BrokerOffset-e.Value.ConsumerOffset, 0), LastTimestamp: e.Value.LastTimestamp})
		}
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	if perr == nil && unknown > 0 && unknown == len(readers) {
		return nil, fmt.Errorf("%w: %s (no broker knows it)", client.ErrGroupNotExist, group)
	}
	return out, perr
}

// ParseRegistries splits a registry list separated by commas (or by
// semicolons, as RocketMQ writes a name server list).
func ParseRegistries(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// DiskState is a broker's disk as the broker reports it (its runtime
// statistics).
type DiskState struct {
	Used      float64 // used fraction (0..1) of the disk holding its commitlog
	FullRatio float64 // store.disk_full_ratio: writes are refused above it
	Full      bool    // it refuses writes for a full disk now
}

// ErrNoDiskState: the broker's runtime statistics do not say its disk
// state (a broker from before they did, or one that cannot measure it).
var ErrNoDiskState = errors.New("admin: the broker does not report its disk state")

// BrokerDisk reads the disk state of the master of broker group
// brokerName, found in topic's route: an error matching client.ErrNoRoute
// when the registries do not list the group for topic.
func (a *Admin) BrokerDisk(ctx context.Context, topic, brokerName string) (DiskState, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return DiskState{}, err
	}
	addr := ""
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.BrokerName == brokerName {
			addr = bd.MasterAddr()
		}
	}
	if addr == "" {
		return DiskState{}, fmt.Errorf("%w: topic %s has no master of broker %q", client.ErrNoRoute, topic, brokerName)
	}
	kv, err := a.BrokerRuntimeInfo(ctx, addr)
	if err != nil {
		return DiskState{}, err
	}
	used, uerr := strconv.ParseFloat(kv["commitLogDiskRatio"], 64)
	mark, merr := strconv.ParseFloat(kv["diskFullRatio"], 64)
	full, ferr := strconv.ParseBool(kv["diskFull"])
	if uerr != nil || merr != nil || ferr != nil || used < 0 || mark <= 0 {
		return DiskState{}, fmt.Errorf("%w: broker %s at %s", ErrNoDiskState, brokerName, addr)
	}
	return DiskState{Used: used, FullRatio: mark, Full: full}, nil
}
