package registry

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// bridgeTimeout bounds the answer of a bridge node to a relayed
// MQTT_ADMIN request.
const bridgeTimeout = 10 * time.Second

// bridgeLive is one registered bridge node.
type bridgeLive struct {
	info       protocol.BridgeInfo
	lastUpdate time.Time
	conn       *remoting.Conn // connection its heartbeats come on; admin calls are relayed over it
}

// bridgeTable holds the bridge nodes (protocol in remoting/protocol/adminext.go).
type bridgeTable struct {
	mu    sync.Mutex
	nodes map[string]*bridgeLive // node id -> node; protected by mu
}

// put lists the node of a heartbeat that came on c. A heartbeat handled
// after c closed lists nothing: c's close removed its nodes already (the
// connection closes before its close hooks run), and listed again on a
// connection that is gone, the node stayed until BrokerExpiry.
func (t *bridgeTable) put(info protocol.BridgeInfo, c *remoting.Conn, now time.Time) (isNew bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c != nil && c.Err() != nil {
		return false
	}
	if t.nodes == nil {
		t.nodes = map[string]*bridgeLive{}
	}
	_, had := t.nodes[info.Node]
	t.nodes[info.Node] = &bridgeLive{info: info, lastUpdate: now, conn: c}
	return !had
}

func (t *bridgeTable) remove(node string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.nodes[node]
	delete(t.nodes, node)
	return ok
}

func (t *bridgeTable) conn(node string) *remoting.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.nodes[node]; n != nil {
		return n.conn
	}
	return nil
}

// removeConn removes the nodes whose heartbeats came on c.
func (t *bridgeTable) removeConn(c *remoting.Conn) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for id, n := range t.nodes {
		if n.conn == c {
			gone = append(gone, id)
			delete(t.nodes, id)
		}
	}
	return gone
}

// expire removes nodes not heard from since now-expiry.
func (t *bridgeTable) expire(now time.Time, expiry time.Duration) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for id, n := range t.nodes {
		if now.Sub(n.lastUpdate) > expiry {
			gone = append(gone, id)
			delete(t.nodes, id)
		}
	}
	return gone
}

func (t *bridgeTable) list() protocol.BridgeList {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := protocol.BridgeList{Bridges: make([]protocol.BridgeInfo, 0, len(t.nodes))}
	for _, n := range t.nodes {
		info := n.info
		info.LastUpdate = n.lastUpdate.UnixMilli()
		out.Bridges = append(out.Bridges, info)
	}
	slices.SortFunc(out.Bridges, func(a, b protocol.BridgeInfo) int { return strings.Compare(a.Node, b.Node) })
	return out
}

func (t *bridgeTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.nodes)
}

func (s *Server) registerBridge(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var info protocol.BridgeInfo
	if err := protocol.DecodeJSON(req.Body, &info); err != nil {
		return errResponse(protocol.SystemError, "bad bridge heartbeat: %v", err), nil
	}
	if info.Node == "" {
		return errResponse(protocol.SystemError, "bad bridge heartbeat: no node id"), nil
	}
	info.LastUpdate = 0
	if s.bridges.put(info, c, s.now()) {
		s.log.Info("registry: bridge node registered", "node", info.Node, "addrs", info.Addrs, "peer", c.RemoteAddr().String())
	}
	return protocol.NewResponse(protocol.Success, ""), nil
}

func (s *Server) unregisterBridge(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var info protocol.BridgeInfo
	if err := protocol.DecodeJSON(req.Body, &info); err != nil {
		return errResponse(protocol.SystemError, "bad bridge unregister: %v", err), nil
	}
	if s.bridges.remove(info.Node) {
		s.log.Info("registry: bridge node unregistered", "node", info.Node)
	}
	return protocol.NewResponse(protocol.Success, ""), nil
}

func (s *Server) getBridgeList(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return jsonResponse(s.bridges.list())
}

// relayMQTTAdmin forwards an MQTT_ADMIN request to the bridge node it
// names, over the node's connection, and answers with the node's answer.
// It returns at once; the answer is written when the node's comes back.
func (s *Server) relayMQTTAdmin(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var r protocol.MQTTAdminRequest
	if err := protocol.DecodeJSON(req.Body, &r); err != nil {
		return errResponse(protocol.SystemError, "bad MQTT admin request: %v", err), nil
	}
	bc := s.bridges.conn(r.Node)
	if bc == nil {
		return errResponse(protocol.QueryNotFound, "bridge node %q is not registered with this registry", r.Node), nil
	}
	fwd := protocol.NewRequest(protocol.MQTTAdmin, nil, slices.Clone(req.Body))
	err := bc.InvokeAsync(fwd, bridgeTimeout, func(resp *protocol.Command, err error) {
		var out *protocol.Command
		if err != nil {
			out = errResponse(protocol.SystemError, "bridge node %q: %v", r.Node, err)
		} else {
			out = protocol.NewResponse(resp.Code, resp.Remark)
			out.Body = slices.Clone(resp.Body)
		}
		if werr := c.WriteResponse(req, out); werr != nil {
			s.log.Debug("registry: MQTT admin answer not written", "peer", c.RemoteAddr().String(), "err", werr)
		}
	})
	if err != nil {
		return errResponse(protocol.SystemError, "bridge node %q: %v", r.Node, err), nil
	}
	return nil, nil // answered by the callback
}
