package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func init() {
	registerAdmin(adminCommand{name: "controller", synopsis: "[-controller ADDRS]",
		summary: "controller replicas, leader, and each broker group's master, epoch and sync state set",
		description: "Asks every controller replica (those of -controller and the peers they name;\n" +
			"default: the registries, for replicas running inside them) for its view:\n" +
			"one row per replica (Raft state, term, leader, last contact with the\n" +
			"leader, and a warning when it has no leader: brokers keep their masters,\n" +
			"elections wait), then one row per broker group from the leader (else any\n" +
			"replica): master id and address, master epoch, sync state set and the\n" +
			"brokers with their liveness. JSON: {\"replicas\": [...], \"groups\": [...]}.",
		examples: []string{"smartgo admin controller -controller 10.0.0.1:9878", "smartgo admin controller -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			addrs := fs.String("controller", "", "controller `addresses`, comma-separated (default: the registries)")
			return func(ctx context.Context, e *adminEnv) error {
				replicas, groups, err := controllerView(ctx, e.a, controllerAddrs(*addrs, e.registries))
				if err != nil {
					return err
				}
				if e.out.json {
					e.out.writeJSON(map[string]any{"replicas": replicas, "groups": groups})
					return nil
				}
				e.out.table(replicas, []string{"REPLICA", "STATE", "TERM", "LEADER", "LAST_CONTACT_MS", "WARNING"}, func(add func(...any)) {
					for _, r := range replicas {
						add(r.Self, r.State, r.Term, dash(r.Leader), r.LastContactMillis, dash(r.Warning))
					}
				})
				fmt.Fprintln(e.out.w)
				e.out.table(groups, []string{"GROUP", "CLUSTER", "MASTER", "MASTER_ADDR", "EPOCH", "SYNC_STATE_SET", "BROKERS"}, func(add func(...any)) {
					for _, g := range groups {
						var bs []string
						for _, m := range g.Brokers {
							state := "down"
							if m.Alive {
								state = "alive"
							}
							bs = append(bs, fmt.Sprintf("%d@%s(%s)", m.ID, m.Addr, state))
						}
						add(g.BrokerName, g.ClusterName, g.MasterID, dash(g.MasterAddr), g.MasterEpoch, idList(g.SyncStateSet), strings.Join(bs, " "))
					}
				})
				return nil
			}
		}})
	registerAdmin(adminCommand{name: "controller elect", synopsis: "-group NAME [-broker ID] [-unclean] [-controller ADDRS]",
		summary: "move a broker group's master (maintenance), or elect one when it has none",
		description: "Asks the controller leader for an election in a broker group. With -broker,\n" +
			"that broker becomes master: it must be alive and in the sync state set\n" +
			"(-unclean lifts that, and messages only the old master had are lost); the\n" +
			"old master becomes a slave and drops writes it had not acknowledged.\n" +
			"Without -broker the controller picks, and only when the master is gone.",
		examples: []string{"smartgo admin controller elect -group broker-a -broker 2 -controller 10.0.0.1:9878"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			addrs := fs.String("controller", "", "controller `addresses`, comma-separated (default: the registries)")
			group := fs.String("group", "", "broker group `name` (broker.name)")
			id := fs.Int64("broker", 0, "broker `id` to make master (0: the controller picks)")
			unclean := fs.Bool("unclean", false, "allow a broker outside the sync state set")
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*group, "-group"); err != nil {
					return err
				}
				if *id < 0 {
					return usagef("-broker must be a broker id (positive) or 0, not %d", *id)
				}
				g, err := e.a.ControllerElect(ctx, controllerAddrs(*addrs, e.registries), *group, *id, *unclean)
				if err != nil {
					return err
				}
				e.out.message(g, fmt.Sprintf("group %s: master %d (%s), epoch %d, sync state set %s",
					g.BrokerName, g.MasterID, g.MasterAddr, g.MasterEpoch, idList(g.SyncStateSet)))
				return nil
			}
		}})
}

func controllerAddrs(flag string, registries []string) []string {
	if strings.TrimSpace(flag) == "" {
		return registries
	}
	return admin.ParseRegistries(flag)
}

// controllerView asks every replica it can find (the given addresses and
// the peers they list) and returns their views, sorted by address, and
// the groups as the leader (else the first answer) has them.
func controllerView(ctx context.Context, a *admin.Admin, addrs []string) ([]*protocol.ControllerMetadata, []protocol.ControllerGroup, error) {
	seen := map[string]bool{}
	var replicas []*protocol.ControllerMetadata
	var errs []string
	var none []error // addresses that run no controller
	for i := 0; i < len(addrs); i++ {
		if seen[addrs[i]] {
			continue
		}
		seen[addrs[i]] = true
		md, err := a.ControllerMetadata(ctx, addrs[i])
		if errors.Is(err, admin.ErrNoController) {
			none = append(none, err)
		}
		if err != nil {
			errs = append(errs, err.Error())
			replicas = append(replicas, &protocol.ControllerMetadata{Self: addrs[i], State: "unreachable", Warning: err.Error()})
			continue
		}
		seen[md.Self] = true
		replicas = append(replicas, md)
		for _, p := range md.Peers {
			addrs = append(addrs, p.Addr)
		}
	}
	var best *protocol.ControllerMetadata
	for _, r := range replicas {
		if r.State == "unreachable" {
			continue
		}
		if best == nil || (r.State == "Leader" && best.State != "Leader") {
			best = r
		}
	}
	if best == nil && len(none) == len(errs) {
		return nil, nil, none[0] // the cluster has no controller: say that, once
	}
	if best == nil {
		return nil, nil, fmt.Errorf("admin: no controller replica answered: %s", strings.Join(errs, "; "))
	}
	slices.SortFunc(replicas, func(x, y *protocol.ControllerMetadata) int { return strings.Compare(x.Self, y.Self) })
	return replicas, best.Groups, nil
}

func idList(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
