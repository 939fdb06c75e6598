package cluster

import (
	"net"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// rawRouteExists asks a registry for topic's route over conn.
func rawRouteExists(conn net.Conn, topic string) bool {
	req := protocol.NewRequest(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic, AcceptStandardJSONOnly: true}, nil)
	req.Opaque = 1
	frame, err := protocol.EncodeFrame(req)
	if err != nil {
		return false
	}
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write(frame); err != nil {
		return false
	}
	resp, _, err := protocol.ReadFrame(conn, nil, 0)
	if err != nil || resp.Code != protocol.Success {
		return false
	}
	var rd protocol.TopicRouteData
	if protocol.DecodeJSON(resp.Body, &rd) != nil {
		return false
	}
	for _, q := range rd.QueueDatas {
		if q != nil && q.WriteQueueNums > 0 {
			return true
		}
	}
	return false
}

// rawBrokerNames asks a registry for the broker names it knows with a
// master.
func rawBrokerNames(addr string) map[string]bool {
	out := map[string]bool{}
	for name, bd := range rawClusterInfo(addr).BrokerAddrTable {
		if bd != nil && bd.MasterAddr() != "" {
			out[name] = true
		}
	}
	return out
}

// rawMasterAddr asks a registry for a broker name's master address.
func rawMasterAddr(addr, name string) string {
	if bd := rawClusterInfo(addr).BrokerAddrTable[name]; bd != nil {
		return bd.MasterAddr()
	}
	return ""
}

// rawClusterInfo asks a registry for GET_BROKER_CLUSTER_INFO (empty on
// failure).
func rawClusterInfo(addr string) protocol.ClusterInfo {
	var ci protocol.ClusterInfo
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ci
	}
	defer conn.Close()
	req := protocol.NewRequest(protocol.GetBrokerClusterInfo, nil, nil)
	req.Opaque = 1
	frame, err := protocol.EncodeFrame(req)
	if err != nil {
		return ci
	}
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write(frame); err != nil {
		return ci
	}
	resp, _, err := protocol.ReadFrame(conn, nil, 0)
	if err != nil || resp.Code != protocol.Success {
		return ci
	}
	_ = protocol.DecodeJSON(resp.Body, &ci)
	return ci
}
