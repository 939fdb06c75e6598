package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/smartgo/smartgo/client/admin"
)

// `broker config`: mqadmin getBrokerConfig and updateBrokerConfig.
func init() {
	registerAdmin(adminCommand{name: "broker config", synopsis: "[-b ADDR] [-cluster C] [-set key=value ...]",
		summary: "a broker's configuration; -set changes it at run time",
		description: "Shows a broker's configuration under RocketMQ's key names (GET_BROKER_CONFIG,\n" +
			"as mqadmin getBrokerConfig): by default of every master (of -cluster), or\n" +
			"of the broker at -b. With -set (repeatable) it changes keys instead, until\n" +
			"the broker restarts (UPDATE_BROKER_CONFIG, as mqadmin updateBrokerConfig):\n" +
			"brokerPermission (6 read and write, 4 read only, 2 write only),\n" +
			"slaveReadEnable, autoCreateSubscriptionGroup and autoCreateTopicEnable\n" +
			"(true or false). A broker refuses any other key, naming it, and then\n" +
			"changes nothing; a lasting change belongs in its TOML file.",
		examples: []string{"smartgo admin broker config", "smartgo admin broker config -b 127.0.0.1:10911 -o json",
			"smartgo admin broker config -set autoCreateTopicEnable=false",
			"smartgo admin broker config -b 127.0.0.1:10911 -set brokerPermission=4   # read only"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			brokerAddr := fs.String("b", "", "broker `address`, or a broker group's name for its master (empty: every master)")
			cluster := clusterFlag(fs)
			var sets setList
			fs.Var(&sets, "set", "change `key=value` (repeatable)")
			return func(ctx context.Context, e *adminEnv) error {
				targets, err := brokerTargets(ctx, e, *brokerAddr, *cluster)
				if err != nil {
					return err
				}
				if len(sets) > 0 {
					kv := map[string]string{}
					for _, s := range sets {
						kv[s.key] = strings.TrimSpace(s.value)
					}
					var lines []string
					for _, b := range targets {
						if err := e.a.UpdateBrokerConfig(ctx, b.Addr, kv); err != nil {
							return err
						}
						lines = append(lines, fmt.Sprintf("broker %s: updated %s", b.Addr, sets.String()))
					}
					e.out.message(map[string]any{"brokers": targets, "updated": kv}, strings.Join(lines, "\n"))
					return nil
				}
				all, err := brokerTables(ctx, targets, e.a.BrokerConfig)
				if err != nil && !errors.Is(err, admin.ErrPartial) {
					return err
				}
				e.out.brokerKeys(targets, all)
				return err // ErrPartial: the brokers it names are missing
			}
		}})
}

// brokerTargets is the broker at addr, else every master of cluster (""
// = every cluster). An addr without a port is taken for a broker group's
// name (as `msg browse -broker` takes one) and gives that group's master:
// it used to be dialled as a host name ("dial broker-a: missing port in
// address").
func brokerTargets(ctx context.Context, e *adminEnv, addr, cluster string) ([]admin.Broker, error) {
	if addr == "" {
		return e.a.Masters(ctx, cluster)
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return []admin.Broker{{Addr: addr}}, nil
	}
	masters, err := e.a.Masters(ctx, cluster)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range masters {
		if m.Name == addr {
			return []admin.Broker{m}, nil
		}
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return nil, fmt.Errorf("-b %q: want a broker address (host:port) or a broker group's name; the groups with a master are %s",
		addr, strings.Join(slices.Compact(names), ", "))
}

// brokerTables reads a key/value table from every target at once. A
// broker that fails is left out and named in the error: admin.ErrPartial
// when others answered, their errors alone when none did.
func brokerTables(ctx context.Context, targets []admin.Broker, read func(context.Context, string) (map[string]string, error)) (map[string]map[string]string, error) {
	tables := make([]map[string]string, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, b := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tables[i], errs[i] = read(ctx, b.Addr)
		}()
	}
	wg.Wait()
	all := map[string]map[string]string{}
	var failed []error
	for i, b := range targets {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			continue
		}
		all[b.Addr] = tables[i]
	}
	switch {
	case len(failed) == 0:
		return all, nil
	case len(failed) == len(targets):
		return nil, errors.Join(failed...)
	}
	return all, fmt.Errorf("%w: %w", admin.ErrPartial, errors.Join(failed...))
}

// brokerKeys prints key/value tables of brokers (all, by address), one
// row per key in key order.
func (o *output) brokerKeys(targets []admin.Broker, all map[string]map[string]string) {
	o.table(all, []string{"BROKER", "KEY", "VALUE"}, func(add func(...any)) {
		for _, b := range targets {
			for _, k := range slices.Sorted(maps.Keys(all[b.Addr])) {
				add(b.Addr, k, all[b.Addr][k])
			}
		}
	})
}
