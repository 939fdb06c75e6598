package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// The consumer group commands beside `group progress` (admin_cmds.go):
// list, create/update (mqadmin updateSubGroup) and delete (mqadmin
// deleteSubGroup).
func init() {
	registerAdmin(adminCommand{name: "group list", summary: "every consumer group the brokers know",
		description: "Lists the consumer groups the brokers have a configuration for (created by\n" +
			"`group create`, or on a consumer's first heartbeat), with the broker groups\n" +
			"that know each one. Broker groups that do not answer are named after the\n" +
			"table (exit 1).",
		examples: []string{"smartgo admin group list", "smartgo admin group list -o json"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			return func(ctx context.Context, e *adminEnv) error {
				groups, err := e.a.Groups(ctx)
				if err != nil && !errors.Is(err, admin.ErrPartial) {
					return err
				}
				e.out.table(groups, []string{"GROUP", "BROKERS", "CONSUME", "BROADCAST", "RETRY_MAX", "SYSTEM"}, func(add func(...any)) {
					for _, g := range groups {
						add(g.Name, strings.Join(g.Brokers, ","), g.ConsumeEnable, g.Broadcast, g.RetryMaxTimes, g.System)
					}
				})
				return err // ErrPartial: the table lacks the broker groups it names
			}
		}})
	for _, verb := range []string{"create", "update"} {
		registerAdmin(adminCommand{name: "group " + verb, synopsis: "-g GROUP [-retry N] [-no-broadcast] [-disable] [-cluster C]",
			summary: verb + " a consumer group on every master (of one cluster)",
			description: "Creates or updates a consumer group's configuration on every master broker\n" +
				"(of -cluster, else of every cluster), as mqadmin updateSubGroup. Both verbs\n" +
				"create a missing group and replace an existing one's settings; the output\n" +
				"says which (JSON: \"created\": true when no broker knew the group).\n" +
				"A group created before its consumers first start can have its offsets set\n" +
				"with `offset reset`, so that they start there rather than where their\n" +
				"consume-from-where setting says (see docs/protocols.md). When some masters\n" +
				"do not answer, the others get the group, the output names those (JSON:\n" +
				"\"result\": \"partial\", \"brokers\"), the error the silent ones, and the\n" +
				"exit status is 1: run it again once they are back.",
			examples: []string{"smartgo admin group " + verb + " -g billing",
				"smartgo admin group " + verb + " -g billing -retry 3",
				"smartgo admin group " + verb + " -g billing && smartgo admin offset reset -g billing -t Orders -ts 1h"},
			setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
				group := fs.String("g", "", "consumer `group`")
				retry := fs.Int("retry", admin.DefaultGroupRetryMaxTimes, "`times` a failed message is retried before it goes to %DLQ%<group> (0.."+strconv.Itoa(admin.MaxGroupRetryMaxTimes)+")")
				noBroadcast := fs.Bool("no-broadcast", false, "refuse broadcasting consumers of the group")
				disable := fs.Bool("disable", false, "refuse the group's pulls (consumption paused)")
				cluster := clusterFlag(fs)
				return func(ctx context.Context, e *adminEnv) error {
					if err := required(*group, "-g"); err != nil {
						return err
					}
					if *retry < 0 || *retry > admin.MaxGroupRetryMaxTimes {
						return usagef("-retry must be between 0 and %d, not %d", admin.MaxGroupRetryMaxTimes, *retry)
					}
					existed, err := e.a.GroupExists(ctx, *group)
					if err != nil {
						return err
					}
					cfg := admin.GroupConfig{Name: *group, NoBroadcast: *noBroadcast, Disabled: *disable, RetryMaxTimes: int32(*retry)}
					if *retry == 0 {
						cfg.RetryMaxTimes = -1 // no retries: straight to the DLQ
					}
					err = e.a.CreateGroup(ctx, *cluster, cfg)
					if on := admin.Answered(err); on != nil {
						e.out.message(map[string]any{"group": *group, "result": "partial", "created": !existed, "brokers": on},
							upsertText("group", *group, verb, existed)+" on "+strings.Join(on, ", "))
						return err // ErrPartial: the brokers it names do not have the group
					}
					if err != nil {
						return err
					}
					e.out.message(map[string]any{"group": *group, "result": "ok", "created": !existed}, upsertText("group", *group, verb, existed))
					return nil
				}
			}})
	}
	registerAdmin(adminCommand{name: "group delete", synopsis: "-g GROUP [-keep-offsets] [-cluster C]",
		summary: "delete a consumer group from the brokers",
		description: "Deletes a consumer group's configuration and committed offsets from every\n" +
			"master of -cluster (else of every cluster), and its %RETRY%<group> and\n" +
			"%DLQ%<group> topics, as mqadmin deleteSubGroup. With -keep-offsets the\n" +
			"offsets stay, so a group of the same name created again resumes from them.\n" +
			"A group no broker knows is an error. Consumers of the group still running\n" +
			"bring it back with their next heartbeat (broker.auto_create_subscription_group).\n" +
			"When some masters do not answer, the others delete it, the output names\n" +
			"those, the error the silent ones (its topics stay), and the exit status\n" +
			"is 1: run it again once they are back.",
		examples: []string{"smartgo admin group delete -g billing"},
		setup: func(fs *cmdFlags) func(context.Context, *adminEnv) error {
			group := fs.String("g", "", "consumer `group`")
			keep := fs.Bool("keep-offsets", false, "keep the group's committed offsets")
			cluster := clusterFlag(fs)
			return func(ctx context.Context, e *adminEnv) error {
				if err := required(*group, "-g"); err != nil {
					return err
				}
				existed, err := e.a.GroupExists(ctx, *group)
				if err != nil {
					return err
				}
				if !existed {
					return fmt.Errorf("%w: %s (no broker knows it)", client.ErrGroupNotExist, *group)
				}
				err = e.a.DeleteGroup(ctx, *cluster, *group, !*keep)
				if on := admin.Answered(err); on != nil {
					e.out.message(map[string]any{"group": *group, "deleted": false, "brokers": on},
						fmt.Sprintf("group %s deleted on %s; its retry and dead-letter topics stay: run this again", *group, strings.Join(on, ", ")))
					return err // ErrPartial: the brokers it names still have the group
				}
				if err != nil {
					return err
				}
				var deleted []string
				for _, t := range []string{"%RETRY%" + *group, "%DLQ%" + *group} {
					switch err := e.a.DeleteTopic(ctx, *cluster, t); {
					case err == nil:
						deleted = append(deleted, t)
					case !errors.Is(err, client.ErrTopicNotExist):
						return fmt.Errorf("group %s deleted, but not its topic %s: %w", *group, t, err)
					}
				}
				text := fmt.Sprintf("group %s deleted", *group)
				if len(deleted) > 0 {
					text += " (and topics " + strings.Join(deleted, ", ") + ")"
				}
				e.out.message(map[string]any{"group": *group, "deleted": true, "offsetsKept": *keep, "topicsDeleted": deleted}, text)
				return nil
			}
		}})
}
