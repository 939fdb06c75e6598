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
	"github.com/smartgo/smartgo/store/record"
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
	if tc.ReadQueues == 0 {
		tc.ReadQueues = DefaultTopicQueues
	}
	if tc.WriteQueues == 0 {
		tc.WriteQueues = DefaultTopicQueues
	}
	if tc.Perm == 0 {
		tc.Perm = DefaultTopicPerm
	}
	masters, err := a.Masters(ctx, cluster)
	if err != nil {
		return err
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

// ErrClientMessageID is MessageByID's error (with client.ErrBadMessage)
// for an id that is no offset id but is a client message id (UNIQ_KEY,
// the MSG_ID column of message listings, as long as an offset id for
// IPv4): MessagesByKey with unique finds it, given its topic.
var ErrClientMessageID = errors.New("admin: a client message id (MSG_ID, UNIQ_KEY), not an offset id (OFFSET_MSG_ID)")

// MessageByID returns the message with an offset message id (as a send
// result's OffsetMsgID), read from the broker the id names, or, when that
// broker does not answer (it died and its slave took over), from the
// replica that holds the same record (see fromReplica).
func (a *Admin) MessageByID(ctx context.Context, offsetMsgID string) (*client.MessageExt, error) {
	m, _, err := a.messageByID(ctx, offsetMsgID)
	return m, err
}

// messageByID is MessageByID that also names the broker group of the
// replica the message was read from when the broker the id names did not
// answer ("" when it did).
func (a *Admin) messageByID(ctx context.Context, offsetMsgID string) (*client.MessageExt, string, error) {
	host, off, err := record.ParseOffsetMessageID(offsetMsgID)
	if err != nil {
		if _, _, _, _, uerr := record.ParseUniqueID(offsetMsgID); uerr == nil {
			return nil, "", fmt.Errorf("%w: %w: %w", client.ErrBadMessage, ErrClientMessageID, err)
		}
		return nil, "", fmt.Errorf("%w: %w", client.ErrBadMessage, err)
	}
	addr := host.String()
	resp, err := a.invokeOK(ctx, "view message", addr, protocol.NewRequest(protocol.ViewMessageByID, &protocol.ViewMessageRequestHeader{Offset: off}, nil))
	if err != nil {
		var be *client.BrokerError
		if errors.As(err, &be) {
			return nil, "", fmt.Errorf("%w: message %s: %w", client.ErrNotFound, offsetMsgID, err)
		}
		if m, group := a.fromReplica(ctx, host, off); m != nil {
			return m, group, nil
		}
		return nil, "", err
	}
	msgs, err := client.DecodeMessages(resp.Body, a.brokerNameOf(ctx, addr))
	if err != nil {
		return nil, "", err
	}
	if len(msgs) == 0 {
		return nil, "", fmt.Errorf("%w: message %s", client.ErrNotFound, offsetMsgID)
	}
	return msgs[0], "", nil
}

func (a *Admin) brokerNameOf(ctx context.Context, addr string) string {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return ""
	}
	for name, bd := range ci.BrokerAddrTable {
		for _, ad := range bd.BrokerAddrs {
			if ad == addr {
				return name
			}
		}
	}
	return ""
}

// MessagesByKey queries every broker of the topic for messages whose KEYS
// (or, with unique, UNIQ_KEY) contain key, stored between begin and end.
// Broker groups that do not answer leave their messages out: the answer
// then comes with an ErrPartial error naming them (an error alone when
// none answered).
func (a *Admin) MessagesByKey(ctx context.Context, topic, key string, maxNum int, begin, end time.Time, unique bool) ([]*client.MessageExt, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	if end.IsZero() {
		end = time.Now().Add(time.Minute)
	}
	if maxNum <= 0 {
		maxNum = 64
	}
	var bs []Broker
	for _, bd := range rd.BrokerDatas {
		if addr := readAddr(bd); addr != "" { // the master, or a slave while there is none
			bs = append(bs, Broker{Cluster: bd.Cluster, Name: bd.BrokerName, Addr: addr})
		}
	}
	var out []*client.MessageExt
	perr := a.fromEach(ctx, "query message", bs, func() *protocol.Command {
		h := &protocol.QueryMessageRequestHeader{Topic: topic, Key: key, MaxNum: int32(maxNum), BeginTimestamp: begin.UnixMilli(),
			EndTimestamp: end.UnixMilli(), UniqueKeyQuery: unique}
		return protocol.NewRequest(protocol.QueryMessage, h, nil)
	}, func(b Broker, resp *protocol.Command) error {
		if resp.Code == protocol.QueryNotFound {
			return nil
		}
		if err := okAnswer("query message", b.Addr, resp); err != nil {
			return err
		}
		msgs, err := client.DecodeMessages(resp.Body, b.Name)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Topic != topic {
				continue
			}
			if unique && m.MsgID != key {
				continue
			}
			if !unique && !contains(m.Keys, key) {
				continue
			}
			out = append(out, m)
		}
		return nil
	})
	if perr != nil && !errors.Is(perr, ErrPartial) {
		return nil, perr
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StoreTimestamp < out[j].StoreTimestamp })
	return out, perr
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// OffsetReset is one queue's reset.
type OffsetReset struct {
	Queue     client.MessageQueue `json:"queue"`
	OldOffset int64               `json:"oldOffset"`
	NewOffset int64               `json:"newOffset"`
}

// ResetOffset moves a group's committed offset on every queue of topic to
// the first message stored at or after ts. Each master is asked with
// INVOKE_BROKER_TO_RESET_OFFSET (as mqadmin resetOffsetByTime, forced): it
// commits the new offsets and tells the group's online consumers, which
// drop what they hold and continue from there. A broker with no consumer of
// the group online (CONSUMER_NOT_ONLINE) gets the offsets written directly
// (SEARCH_OFFSET_BY_TIMESTAMP, then UPDATE_CONSUMER_OFFSET per queue). A
// group that no master knows is client.ErrGroupNotExist.
func (a *Admin) ResetOffset(ctx context.Context, group, topic string, ts time.Time) ([]OffsetReset, error) {
	rd, err := a.TopicRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := a.checkGroup(ctx, group); err != nil {
		return nil, err
	}
	var out []OffsetReset
	for _, qd := range rd.QueueDatas {
		addr := ""
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerName == qd.BrokerName {
				addr = bd.MasterAddr()
			}
		}
		if addr == "" {
			continue
		}
		olds := make([]int64, qd.ReadQueueNums)
		for q := range olds {
			olds[q] = -1
			if r, err := a.invoke(ctx, "query offset", addr, protocol.NewRequest(protocol.QueryConsumerOffset,
				&protocol.QueryConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: int32(q)}, nil)); err == nil && r.Code == protocol.Success {
				var h protocol.OffsetResponseHeader
				if r.DecodeHeader(&h) == nil {
					olds[q] = h.Offset
				}
			}
		}
		news, err := a.resetOnline(ctx, addr, group, topic, ts)
		if err != nil {
			return out, err
		}
		for q := int32(0); q < qd.ReadQueueNums; q++ {
			mq := client.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: q}
			off, ok := news[q]
			if news == nil { // nobody online: write the offset
				found, err := a.searchOffset(ctx, addr, topic, q, ts)
				if err != nil {
					return out, err
				}
				if _, err := a.invokeOK(ctx, "update offset", addr, protocol.NewRequest(protocol.UpdateConsumerOffset,
					&protocol.UpdateConsumerOffsetRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: q, CommitOffset: found}, nil)); err != nil {
					return out, err
				}
				off, ok = found, true
			}
			if ok {
				out = append(out, OffsetReset{Queue: mq, OldOffset: olds[q], NewOffset: off})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Queue.BrokerName != out[j].Queue.BrokerName {
			return out[i].Queue.BrokerName < out[j].Queue.BrokerName
		}
		return out[i].Queue.QueueID < out[j].Queue.QueueID
	})
	return out, nil
}

// OffsetByTime returns the first offset of queue mq whose message was
// stored at or after ts (the broker's clock), or the queue's max offset
// when none was: SEARCH_OFFSET_BY_TIMESTAMP to the queue's master.
func (a *Admin) OffsetByTime(ctx context.Context, mq client.MessageQueue, ts time.Time) (int64, error) {
	rd, err := a.TopicRoute(ctx, mq.Topic)
	if err != nil {
		return 0, err
	}
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.BrokerName == mq.BrokerName && bd.MasterAddr() != "" {
			return a.searchOffset(ctx, bd.MasterAddr(), mq.Topic, mq.QueueID, ts)
		}
	}
	return 0, fmt.Errorf("%w: topic %s has no master of broker %q", client.ErrNoRoute, mq.Topic, mq.BrokerName)
}

// searchOffset asks the broker at addr for the first offset of a queue
// stored at or after ts (SEARCH_OFFSET_BY_TIMESTAMP).
func (a *Admin) searchOffset(ctx context.Context, addr, topic string, queueID int32, ts time.Time) (int64, error) {
	resp, err := a.invokeOK(ctx, "search offset", addr, protocol.NewRequest(protocol.SearchOffsetByTimestamp,
		&protocol.SearchOffsetRequestHeader{Topic: topic, QueueID: queueID, Timestamp: ts.UnixMilli()}, nil))
	if err != nil {
		return 0, err
	}
	defer resp.Recycle()
	var oh protocol.OffsetResponseHeader
	if err := resp.DecodeHeader(&oh); err != nil {
		return 0, fmt.Errorf("admin: search offset: %w", err)
	}
	return oh.Offset, nil
}

// resetOnline asks the broker at addr to reset group's offsets on topic
// to ts and tell its online consumers (INVOKE_BROKER_TO_RESET_OFFSET,
// forced); it returns the new offset per queue id, or nil when no consumer
// of the group is online there.
func (a *Admin) resetOnline(ctx context.Context, addr, group, topic string, ts time.Time) (map[int32]int64, error) {
	resp, err := a.invoke(ctx, "reset offset", addr, protocol.NewRequest(protocol.InvokeBrokerToResetOffset,
		&protocol.ResetOffsetRequestHeader{Topic: topic, Group: group, Timestamp: ts.UnixMilli(), IsForce: true}, nil))
	if err != nil {
		return nil, err
	}
	switch resp.Code {
	case protocol.ConsumerNotOnline:
		return nil, nil
	case protocol.Success:
	default:
		return nil, fmt.Errorf("admin: reset offset at %s: code %d: %s", addr, resp.Code, resp.Remark)
	}
	var body protocol.ResetOffsetBody
	if err := protocol.DecodeJSON(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("admin: reset offset at %s: %w", addr, err)
	}
	news := make(map[int32]int64, len(body.OffsetTable))
	for _, e := range body.OffsetTable {
		news[e.Queue.QueueID] = e.Value
	}
	return news, nil
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

// Member is one broker of a broker group as `admin cluster` shows it.
type Member struct {
	Cluster   string `json:"cluster"`
	Name      string `json:"name"`
	ID        int64  `json:"id"`
	Addr      string `json:"addr"`
	Role      string `json:"role"`      // from GET_BROKER_RUNTIME_INFO brokerRole ("" if unreachable)
	MaxOffset int64  `json:"maxOffset"` // commitLogMaxOffset
	// LagBytes is, for a slave, its master's commitlog end minus its own
	// (-1 when the master is unknown); for a master, haLagBytes (how far
	// its best slave's ack is behind; -1 without a slave).
	LagBytes int64 `json:"lagBytes"`
	// From the same runtime info, when the broker reports them: its
	// version, start time (Unix ms, 0 unknown), first commitlog offset,
	// used fraction of its disk (-1 unknown), how long replication has
	// been behind (-1 unknown), and messages stored and pulled per second
	// over the last minute.
	Version    string  `json:"version,omitempty"`
	BootTime   int64   `json:"bootTime,omitempty"`
	MinOffset  int64   `json:"minOffset"`
	DiskRatio  float64 `json:"diskRatio"`
	LagSeconds float64 `json:"lagSeconds"`
	PutTPS     float64 `json:"putTps"`
	GetTPS     float64 `json:"getTps"`
	Err        string  `json:"error,omitempty"`
}

// fillRuntime copies the optional runtime info keys into m.
func (m *Member) fillRuntime(info map[string]string) {
	m.Version = info["brokerVersionDesc"]
	m.BootTime, _ = strconv.ParseInt(info["bootTimestamp"], 10, 64)
	m.MinOffset, _ = strconv.ParseInt(info["commitLogMinOffset"], 10, 64)
	num := func(k string, def float64) float64 {
		f := strings.Fields(info[k]) // TPS values are window triples: the first is the shortest
		if len(f) == 0 {
			return def
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return def
		}
		return v
	}
	m.DiskRatio = num("commitLogDiskRatio", -1)
	m.LagSeconds = num("replicationLagSeconds", -1)
	m.PutTPS, m.GetTPS = num("putTps", 0), num("getTransferedTps", 0)
}

// ClusterMembers returns every broker the registries know, with its role,
// commitlog end and replication lag, sorted by cluster, name and id.
func (a *Admin) ClusterMembers(ctx context.Context) ([]Member, error) {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	// Every broker is asked at once: one that does not answer (hung, cut
	// off) costs the others nothing.
	var out []Member
	for cluster, names := range ci.ClusterAddrTable {
		for _, n := range names {
			if bd := ci.BrokerAddrTable[n]; bd != nil {
				for id, addr := range bd.BrokerAddrs {
					out = append(out, Member{Cluster: cluster, Name: n, ID: id, Addr: addr, MaxOffset: -1, LagBytes: -1, DiskRatio: -1, LagSeconds: -1})
				}
			}
		}
	}
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func(m *Member) {
			defer wg.Done()
			info, err := a.BrokerRuntimeInfo(ctx, m.Addr)
			if err != nil {
				m.Err = err.Error()
				return
			}
			m.Role = info["brokerRole"]
			m.fillRuntime(info)
			m.MaxOffset, _ = strconv.ParseInt(info["commitLogMaxOffset"], 10, 64)
			if v, ok := info["haLagBytes"]; ok && m.ID == protocol.MasterID {
				m.LagBytes, _ = strconv.ParseInt(v, 10, 64)
			}
		}(&out[i])
	}
	wg.Wait()
	masterEnd := map[string]int64{} // broker name -> its master's end, when it answered
	for _, m := range out {
		if m.ID == protocol.MasterID && m.Err == "" {
			masterEnd[m.Cluster+"/"+m.Name] = m.MaxOffset
		}
	}
	for i := range out {
		if end, ok := masterEnd[out[i].Cluster+"/"+out[i].Name]; ok && out[i].ID != protocol.MasterID && out[i].MaxOffset >= 0 {
			out[i].LagBytes = max(0, end-out[i].MaxOffset)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}
