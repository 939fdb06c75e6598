package admin

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/smartgo/smartgo/remoting/protocol"
)

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
