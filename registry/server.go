package registry

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Server is a registry (name server): brokers register their topics every
// 30 s, clients ask it for topic routes. Registries keep no state in common;
// brokers register with each of them.
type Server struct {
	opts    Options
	log     *slog.Logger
	routes  *routeTable
	bridges bridgeTable
	kv      *kvStore
	rs      *remoting.Server
	now     func() time.Time
	rt      runtimeOptions // what UPDATE_NAMESRV_CONFIG may change

	stop   chan struct{}
	rescan chan struct{} // cap 1: the scan period changed
	// The scan loop's own: when the last scan ran (monotonic clock), and
	// until when a stall's grace holds (scan).
	lastScan, graceUntil time.Time
	wg                   sync.WaitGroup // scan loop
	once                 sync.Once
}

// New validates opts, loads the KV config and returns a registry that is
// not listening yet.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	// Every line the registry writes is caused by a broker or client
	// request: each reason at most once per interval.
	log := ratelog.Wrap(opts.Logger, 0)
	kv, err := openKV(opts.KVConfigPath)
	if err != nil {
		return nil, err
	}
	ro := remoting.Options{Addr: opts.Addr, Logger: log}
	ro.IdleTimeout = opts.IdleTimeout
	ro.MaxFrameSize = opts.MaxFrameSize
	rs, err := remoting.NewServer(ro)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	s := &Server{opts: opts, log: log, routes: newRouteTable(), kv: kv, rs: rs, now: time.Now, stop: make(chan struct{}),
		rescan: make(chan struct{}, 1)}
	s.rt.scanInterval.Store(int64(opts.ScanInterval))
	s.rt.brokerExpiry.Store(int64(opts.BrokerExpiry))
	s.registerProcessors()
	rs.OnConnClose(s.connClosed)
	return s, nil
}

// Start listens and starts the liveness scan. ctx bounds the listen call.
func (s *Server) Start(ctx context.Context) error {
	if err := s.rs.Start(ctx); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	s.lastScan = time.Now()
	s.wg.Add(1)
	go s.scanLoop()
	s.log.Info("registry: started", "addr", s.rs.Addr().String(), "kv_config", s.opts.KVConfigPath)
	return nil
}

// Remoting returns the registry's remoting server, for a component that
// serves its own request codes on the registry's port (a controller
// replica inside `smartgo registry`).
func (s *Server) Remoting() *remoting.Server { return s.rs }

// Addr returns the listening address, or nil before Start.
func (s *Server) Addr() net.Addr { return s.rs.Addr() }

// Close stops serving and waits for every goroutine. It is idempotent.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
	return s.rs.Close()
}

func (s *Server) scanLoop() {
	defer s.wg.Done()
	t := time.NewTimer(time.Duration(s.rt.scanInterval.Load()))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.rescan:
			t.Reset(time.Duration(s.rt.scanInterval.Load()))
		case <-t.C:
			s.scan()
			t.Reset(time.Duration(s.rt.scanInterval.Load()))
		}
	}
}

// scan removes brokers silent for longer than the broker expiry and
// closes their connections.
//
// A scan late by more than the expiry means the registry itself stalled
// (stopped, swapped out, its host suspended): it heard nothing in that
// time, and the registrations the brokers sent meanwhile wait unread in
// its sockets. Every broker would look silent past the expiry; instead
// the registry expires none for one more heartbeat interval (the longest
// gap it saw between two registrations of a broker, at most the expiry),
// which lets each live broker's next registration in. A broker still
// silent after that is expired at the next scan.
func (s *Server) scan() {
	expiry := time.Duration(s.rt.brokerExpiry.Load())
	now := time.Now()
	if late := now.Sub(s.lastScan) - time.Duration(s.rt.scanInterval.Load()); !s.lastScan.IsZero() && late > expiry {
		grace := s.routes.heartbeatGap(expiry)
		s.graceUntil = now.Add(grace)
		s.log.Warn("registry: its own liveness scan ran late (the process stalled?): brokers get one more heartbeat interval before they expire",
			"late", late.Round(time.Millisecond), "expiry", expiry, "grace", grace.Round(time.Millisecond))
	}
	s.lastScan = now
	if now.Before(s.graceUntil) {
		return
	}
	addrs, conns := s.routes.expire(s.now(), expiry)
	for _, a := range addrs {
		s.log.Warn("registry: broker expired", "broker", a, "expiry", expiry)
	}
	for _, c := range conns {
		c.Close()
	}
	for _, n := range s.bridges.expire(s.now(), s.opts.BrokerExpiry) {
		s.log.Warn("registry: bridge node expired", "node", n, "expiry", s.opts.BrokerExpiry)
	}
}

func (s *Server) connClosed(c *remoting.Conn, err error) {
	for _, a := range s.routes.removeConn(c) {
		s.log.Info("registry: broker connection closed, broker removed", "broker", a, "peer", c.RemoteAddr().String(), "reason", err)
	}
	for _, n := range s.bridges.removeConn(c) {
		s.log.Info("registry: bridge connection closed, node removed", "node", n, "peer", c.RemoteAddr().String(), "reason", err)
	}
}

// registerProcessors registers every processor NoRetain: none keeps any
// part of req.Body once it returned. Only REGISTER_BROKER and
// QUERY_DATA_VERSION read the body: they check its CRC and decode it with
// encoding/json (through protocol.DecodeJSON), which copies every string
// and slice it stores, and keep only the decoded values; none keeps req
// to answer later. The remoting connection may thus reuse the requests'
// receive buffers.
func (s *Server) registerProcessors() {
	reg := func(code int32, pool remoting.Pool, fn func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error)) {
		s.rs.RegisterWith(code, pool, remoting.ProcessorFunc(fn), remoting.RegisterOptions{NoRetain: true})
	}
	reg(protocol.RegisterBroker, remoting.PoolHeartbeat, s.registerBroker)
	reg(protocol.UnregisterBroker, remoting.PoolHeartbeat, s.unregisterBroker)
	reg(protocol.QueryDataVersion, remoting.PoolHeartbeat, s.queryDataVersion)
	reg(protocol.GetRouteInfoByTopic, remoting.PoolDefault, s.getRouteInfo)
	reg(protocol.GetBrokerClusterInfo, remoting.PoolDefault, s.getClusterInfo)
	reg(protocol.GetAllTopicListFromNameserver, remoting.PoolDefault, s.getAllTopics)
	reg(protocol.GetTopicsByCluster, remoting.PoolDefault, s.getTopicsByCluster)
	reg(protocol.DeleteTopicInNamesrv, remoting.PoolAdmin, s.deleteTopic)
	reg(protocol.WipeWritePermOfBroker, remoting.PoolAdmin, s.writePerm(false))
	reg(protocol.AddWritePermOfBroker, remoting.PoolAdmin, s.writePerm(true))
	reg(protocol.PutKVConfig, remoting.PoolAdmin, s.putKV)
	reg(protocol.GetKVConfig, remoting.PoolDefault, s.getKV)
	reg(protocol.DeleteKVConfig, remoting.PoolAdmin, s.deleteKV)
	reg(protocol.GetKVListByNamespace, remoting.PoolDefault, s.getKVList)
	reg(protocol.RegisterBridge, remoting.PoolHeartbeat, s.registerBridge)
	reg(protocol.UnregisterBridge, remoting.PoolHeartbeat, s.unregisterBridge)
	reg(protocol.GetBridgeList, remoting.PoolDefault, s.getBridgeList)
	// Answered later, from the bridge's answer: keeps the request.
	s.rs.RegisterWith(protocol.MQTTAdmin, remoting.PoolAdmin, remoting.ProcessorFunc(s.relayMQTTAdmin), remoting.RegisterOptions{})
	reg(protocol.GetSystemTopicListFromNS, remoting.PoolDefault, s.getSystemTopics)
	reg(protocol.GetUnitTopicList, remoting.PoolDefault, s.topicsWithFlags(func(f int32) bool { return f&topicSysFlagUnit != 0 }))
	reg(protocol.GetHasUnitSubTopicList, remoting.PoolDefault, s.topicsWithFlags(func(f int32) bool { return f&topicSysFlagUnitSub != 0 }))
	reg(protocol.GetHasUnitSubUnunitTopicList, remoting.PoolDefault, s.topicsWithFlags(func(f int32) bool {
		return f&topicSysFlagUnit == 0 && f&topicSysFlagUnitSub != 0
	}))
	reg(protocol.GetNamesrvConfig, remoting.PoolAdmin, s.getConfig)
	reg(protocol.UpdateNamesrvConfig, remoting.PoolAdmin, s.updateConfig)
}

// TopicSysFlag bits of a QueueData.
const (
	topicSysFlagUnit    int32 = 1 << 0
	topicSysFlagUnitSub int32 = 1 << 1
)

// getSystemTopics serves GET_SYSTEM_TOPIC_LIST_FROM_NS: the cluster names
// and broker names (RocketMQ brokers create a topic of each), with one
// broker address to ask about them.
func (s *Server) getSystemTopics(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	topics, addr := s.routes.systemTopics()
	return jsonResponse(protocol.TopicList{TopicList: topics, BrokerAddr: addr})
}

// topicsWithFlags serves the unit topic lists (GET_UNIT_TOPIC_LIST and the
// two GET_HAS_UNIT_SUB_* lists): topics whose queue data's sys flag
// matches.
func (s *Server) topicsWithFlags(match func(int32) bool) func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		return jsonResponse(protocol.TopicList{TopicList: s.routes.topicsWhere(match)})
	}
}

func errResponse(code int32, format string, args ...any) *protocol.Command {
	return protocol.NewResponse(code, fmt.Sprintf(format, args...))
}

func jsonResponse(v any) (*protocol.Command, error) {
	body, err := protocol.EncodeJSON(v)
	if err != nil {
		return nil, err
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.Body = body
	return resp, nil
}

// bodyCRC32 is RocketMQ's UtilAll.crc32: IEEE CRC-32 masked to 31 bits.
func bodyCRC32(b []byte) int32 { return int32(crc32.ChecksumIEEE(b) & 0x7FFFFFFF) }

func (s *Server) registerBroker(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.RegisterBrokerRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	if h.BodyCRC32 != 0 && bodyCRC32(req.Body) != h.BodyCRC32 {
		s.log.Warn("registry: register body crc32 mismatch", "broker", h.BrokerAddr, "peer", c.RemoteAddr().String())
		return protocol.NewResponse(protocol.SystemError, "crc32 not match"), nil
	}
	var wrapper *protocol.TopicConfigSerializeWrapper // nil: registration without topic data
	if len(req.Body) > 0 {
		wrapper = &protocol.TopicConfigSerializeWrapper{}
		if h.Compressed {
			return protocol.NewResponse(protocol.SystemError, "compressed register body not supported, set compressedRegister=false"), nil
		}
		if req.Version >= protocol.VersionV3_0_11 {
			var body protocol.RegisterBrokerBody
			if err := protocol.DecodeJSON(req.Body, &body); err != nil {
				return errResponse(protocol.SystemError, "%v", err), nil
			}
			*wrapper = body.TopicConfigSerializeWrapper
		} else if err := protocol.DecodeJSON(req.Body, wrapper); err != nil {
			return errResponse(protocol.SystemError, "%v", err), nil
		}
	}
	ha, master := s.routes.register(registration{
		cluster: h.ClusterName, brokerName: h.BrokerName, brokerAddr: h.BrokerAddr, haServerAddr: h.HAServerAddr,
		brokerID: h.BrokerID, topics: wrapper, conn: c, now: s.now(),
	})
	s.log.Debug("registry: broker registered", "broker", h.BrokerAddr, "name", h.BrokerName, "id", h.BrokerID,
		"cluster", h.ClusterName)
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&protocol.RegisterBrokerResponseHeader{HAServerAddr: ha, MasterAddr: master})
	if m := s.kv.list(protocol.NamespaceOrderTopicConfig); m != nil {
		body, err := protocol.EncodeJSON(protocol.KVTable{Table: m})
		if err != nil {
			return nil, err
		}
		resp.Body = body
	}
	return resp, nil
}

func (s *Server) unregisterBroker(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.UnregisterBrokerRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	s.routes.unregister(h.BrokerName, h.BrokerAddr, h.BrokerID)
	s.log.Info("registry: broker unregistered", "broker", h.BrokerAddr, "name", h.BrokerName, "id", h.BrokerID)
	return protocol.NewResponse(protocol.Success, ""), nil
}

func (s *Server) queryDataVersion(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.QueryDataVersionRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	var dv protocol.DataVersion
	if len(req.Body) > 0 {
		if err := protocol.DecodeJSON(req.Body, &dv); err != nil {
			return errResponse(protocol.SystemError, "%v", err), nil
		}
	}
	changed, stored := s.routes.dataVersionChanged(h.BrokerAddr, dv, s.now())
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&protocol.QueryDataVersionResponseHeader{Changed: changed})
	if stored != nil {
		body, err := protocol.EncodeJSON(stored)
		if err != nil {
			return nil, err
		}
		resp.Body = body
	}
	return resp, nil
}

func (s *Server) getRouteInfo(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.GetRouteInfoRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	rd := s.routes.topicRoute(h.Topic)
	if rd == nil {
		return errResponse(protocol.TopicNotExist, "No topic route info in name server for the topic: %s", h.Topic), nil
	}
	if conf, ok := s.kv.get(protocol.NamespaceOrderTopicConfig, h.Topic); ok {
		rd.OrderTopicConf = conf
	}
	// Always the standard form (quoted broker-id keys): Java and Go
	// clients of every version parse it.
	return jsonResponse(rd)
}

func (s *Server) getClusterInfo(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return jsonResponse(s.routes.clusterInfo())
}

func (s *Server) getAllTopics(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return jsonResponse(protocol.TopicList{TopicList: s.routes.topics()})
}

func (s *Server) getTopicsByCluster(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.GetTopicsByClusterRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	return jsonResponse(protocol.TopicList{TopicList: s.routes.topicsByCluster(h.Cluster)})
}

func (s *Server) deleteTopic(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.DeleteTopicInNamesrvRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	s.routes.deleteTopic(h.Topic, h.ClusterName)
	s.log.Info("registry: topic deleted", "topic", h.Topic, "cluster", h.ClusterName, "peer", c.RemoteAddr().String())
	return protocol.NewResponse(protocol.Success, ""), nil
}

func (s *Server) writePerm(writable bool) func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		var h protocol.BrokerPermRequestHeader
		if err := req.DecodeHeader(&h); err != nil {
			return errResponse(protocol.SystemError, "%v", err), nil
		}
		n := s.routes.setWritePerm(h.BrokerName, writable)
		s.log.Info("registry: broker write permission changed", "name", h.BrokerName, "writable", writable, "topics", n)
		resp := protocol.NewResponse(protocol.Success, "")
		if writable {
			resp.SetHeader(&protocol.AddWritePermResponseHeader{AddTopicCount: n})
		} else {
			resp.SetHeader(&protocol.WipeWritePermResponseHeader{WipeTopicCount: n})
		}
		return resp, nil
	}
}

func (s *Server) kvHeader(req *protocol.Command) (protocol.KVConfigRequestHeader, error) {
	h := protocol.KVConfigRequestHeader{Code: req.Code}
	return h, req.DecodeHeader(&h)
}

func (s *Server) putKV(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	h, err := s.kvHeader(req)
	if err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	if err := s.kv.put(h.Namespace, h.Key, h.Value); err != nil {
		s.log.Error("registry: kv config not persisted", "err", err)
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	s.log.Info("registry: kv config put", "namespace", h.Namespace, "key", h.Key, "value", h.Value)
	return protocol.NewResponse(protocol.Success, ""), nil
}

func (s *Server) getKV(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	h, err := s.kvHeader(req)
	if err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	v, ok := s.kv.get(h.Namespace, h.Key)
	if !ok {
		return errResponse(protocol.QueryNotFound, "No config item, Namespace: %s Key: %s", h.Namespace, h.Key), nil
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&protocol.GetKVConfigResponseHeader{Value: v})
	return resp, nil
}

func (s *Server) deleteKV(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	h, err := s.kvHeader(req)
	if err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	if err := s.kv.delete(h.Namespace, h.Key); err != nil {
		s.log.Error("registry: kv config not persisted", "err", err)
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	s.log.Info("registry: kv config deleted", "namespace", h.Namespace, "key", h.Key)
	return protocol.NewResponse(protocol.Success, ""), nil
}

func (s *Server) getKVList(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	h, err := s.kvHeader(req)
	if err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	m := s.kv.list(h.Namespace)
	if m == nil {
		return errResponse(protocol.QueryNotFound, "No config item, Namespace: %s", h.Namespace), nil
	}
	return jsonResponse(protocol.KVTable{Table: m})
}
