package controller

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a controller replica, read at scrape time from what
// Metadata reports (the same view as `smartgo admin controller`): its Raft
// state and term, whether it knows a leader (a replica that lost its
// quorum does not, and elections are suspended), how long since it heard
// from the leader, and each broker group's master, epoch, sync state set
// and live members as this replica sees them.
var (
	descRaftState   = prometheus.NewDesc("smartgo_controller_raft_state", "1 for this replica's Raft state (Follower, Candidate, Leader, Shutdown), 0 for the others.", []string{"state"}, nil)
	descTerm        = prometheus.NewDesc("smartgo_controller_raft_term", "This replica's current Raft term.", nil, nil)
	descLeaderKnown = prometheus.NewDesc("smartgo_controller_leader_known", "1 while this replica knows a Raft leader; 0 without one (no majority reachable: elections suspended).", nil, nil)
	descLastContact = prometheus.NewDesc("smartgo_controller_last_contact_seconds", "Seconds since this replica last heard from the leader (0 on the leader; absent before the first contact).", nil, nil)
	descGroupMaster = prometheus.NewDesc("smartgo_controller_group_master_id", "A broker group's master id (0: none).", []string{"group"}, nil)
	descGroupEpoch  = prometheus.NewDesc("smartgo_controller_group_master_epoch", "A broker group's master epoch (bumped by every election).", []string{"group"}, nil)
	descGroupSync   = prometheus.NewDesc("smartgo_controller_group_sync_state_set_size", "Members of a broker group's sync state set.", []string{"group"}, nil)
	descGroupAlive  = prometheus.NewDesc("smartgo_controller_group_brokers_alive", "Members of a broker group whose heartbeats this replica receives.", []string{"group"}, nil)
	raftStates      = []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown}
)

// Collectors returns the replica's metric collectors.
func (c *Controller) Collectors() []prometheus.Collector { return []prometheus.Collector{collector{c}} }

type collector struct{ c *Controller }

func (m collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRaftState, descTerm, descLeaderKnown, descLastContact, descGroupMaster, descGroupEpoch, descGroupSync, descGroupAlive} {
		ch <- d
	}
}

func (m collector) Collect(ch chan<- prometheus.Metric) {
	md := m.c.Metadata()
	for _, s := range raftStates {
		v := 0.0
		if s.String() == md.State {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRaftState, prometheus.GaugeValue, v, s.String())
	}
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(md.Term))
	known := 0.0
	if md.Leader != "" {
		known = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeaderKnown, prometheus.GaugeValue, known)
	if md.LastContactMillis >= 0 {
		ch <- prometheus.MustNewConstMetric(descLastContact, prometheus.GaugeValue, float64(md.LastContactMillis)/1000)
	}
	for _, g := range md.Groups {
		alive := 0
		for _, b := range g.Brokers {
			if b.Alive {
				alive++
			}
		}
		ch <- prometheus.MustNewConstMetric(descGroupMaster, prometheus.GaugeValue, float64(g.MasterID), g.BrokerName)
		ch <- prometheus.MustNewConstMetric(descGroupEpoch, prometheus.GaugeValue, float64(g.MasterEpoch), g.BrokerName)
		ch <- prometheus.MustNewConstMetric(descGroupSync, prometheus.GaugeValue, float64(len(g.SyncStateSet)), g.BrokerName)
		ch <- prometheus.MustNewConstMetric(descGroupAlive, prometheus.GaugeValue, float64(alive), g.BrokerName)
	}
}
