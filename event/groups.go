package event

import (
	"context"
	"errors"
	"fmt"
	"reflect"
)

// ensureGroup returns the stored settings of group on topic, creating
// them from asked (with defaults) for a group that has none, and refuses
// a non-zero field of asked that differs from the stored one.
func (b *Bus) ensureGroup(ctx context.Context, topic, group string, asked GroupConfig) (GroupConfig, error) {
	cfg, created, err := b.cfg.Groups.CreateGroup(ctx, topic, group, asked.Resolved(topic))
	if err != nil {
		return GroupConfig{}, fmt.Errorf("event: settings of group %q on %q: %w", group, topic, err)
	}
	cfg.setDefaults(topic)
	if !created {
		if c := cfg.conflicts(&asked); len(c) > 0 {
			return cfg, &GroupConfigError{Topic: topic, Group: group, Conflicts: c}
		}
	}
	return cfg, nil
}

// CreateGroup creates group on topic with the settings cfg (defaults for
// its zero fields) and its cursors at cfg's start position, so that the
// group receives every record published from then on (or from its start
// position) even before its first subscriber. A group that exists
// already is no error when it has the settings cfg asks for (its non-zero
// fields); otherwise the error is a [*GroupConfigError] naming the
// fields. It returns the group's settings.
func (b *Bus) CreateGroup(ctx context.Context, topic, group string, cfg GroupConfig) (GroupConfig, error) {
	if b.isClosed() {
		return GroupConfig{}, ErrClosed
	}
	if err := errors.Join(ValidateTopic(topic), ValidateGroup(group), cfg.Validate()); err != nil {
		return GroupConfig{}, err
	}
	stored, err := b.ensureGroup(ctx, topic, group, cfg)
	if err != nil {
		return stored, err
	}
	cur, err := b.cfg.Cursors.Cursors(ctx, topic, group)
	if err != nil {
		return stored, fmt.Errorf("event: read cursor of group %q on %q: %w", group, topic, err)
	}
	if len(cur) > 0 {
		return stored, nil
	}
	n, err := b.partitionsOf(ctx, topic)
	if err != nil {
		return stored, err
	}
	from, err := b.resolve(ctx, topic, stored.Start)
	if err != nil {
		return stored, err
	}
	for p := 0; p < n; p++ {
		if err := b.cfg.Cursors.CommitCursor(ctx, PartitionRef{Topic: topic, Group: group, Partition: p}, from, Fence{}); err != nil {
			return stored, fmt.Errorf("event: create cursor of group %q on %q: %w", group, topic, err)
		}
	}
	return stored, nil
}

// GroupConfig returns the stored settings of group on topic, with the
// defaults filled in, or an error wrapping ErrNotFound for a group that
// has none (it was never subscribed or created, or was subscribed only
// by a release that did not store them).
func (b *Bus) GroupConfig(ctx context.Context, topic, group string) (GroupConfig, error) {
	if b.isClosed() {
		return GroupConfig{}, ErrClosed
	}
	if err := errors.Join(ValidateTopic(topic), ValidateGroup(group)); err != nil {
		return GroupConfig{}, err
	}
	cfg, err := b.cfg.Groups.GroupConfig(ctx, topic, group)
	if err != nil {
		return GroupConfig{}, fmt.Errorf("event: settings of group %q on %q: %w", group, topic, err)
	}
	cfg.setDefaults(topic)
	return cfg, nil
}

// UpdateGroup changes the settings of group on topic: change is called
// with the stored settings and edits them. Every member of the group, in
// this process and in others sharing the store, delivers by the new
// settings from its next lease renewal (within [Config].LeaseTTL/3): a
// delivery already made keeps the lease it was given, a redelivery or
// dead-letter decision after the change follows the new MaxAttempts,
// backoff and dead-letter topic. The start position cannot be changed
// (it is where the group began; move the group with [Bus.ResetCursor]),
// nor KeyOrdered while the group has live members. It returns the new
// settings. Two updates at once are applied one after the other, the
// later one's change seeing the settings before the earlier one's:
// serialize updates of one group.
func (b *Bus) UpdateGroup(ctx context.Context, topic, group string, change func(*GroupConfig)) (GroupConfig, error) {
	old, err := b.GroupConfig(ctx, topic, group)
	if err != nil {
		return GroupConfig{}, err
	}
	cfg := old
	change(&cfg)
	if err := cfg.Validate(); err != nil {
		return old, err
	}
	cfg.setDefaults(topic)
	if cfg.Start != old.Start {
		return old, invalid(fieldStart, "group %q on %q started at %s, asked %s: a group's start position is kept from its creation; move its cursor with ResetCursor", group, topic, old.Start, cfg.Start)
	}
	if cfg.KeyOrdered != old.KeyOrdered {
		members, err := b.liveMembers(ctx, topic, group)
		if err != nil {
			return old, err
		}
		if len(members) > 0 {
			return old, fmt.Errorf("%w: keyOrdered of group %q on %q cannot change while it has live members (%d): stop them first", ErrGroupActive, group, topic, len(members))
		}
	}
	if reflect.DeepEqual(cfg, old) {
		return cfg, nil
	}
	if err := b.cfg.Groups.UpdateGroup(ctx, topic, group, cfg); err != nil {
		return old, fmt.Errorf("event: update settings of group %q on %q: %w", group, topic, err)
	}
	// This Bus's members see it at once; others at their next renewal.
	b.mu.Lock()
	for _, g := range b.groups {
		if g.cfgKey == (groupKey{topic, group}) {
			g.setConfig(&cfg)
		}
	}
	b.mu.Unlock()
	return cfg, nil
}

// policy returns the group's settings now.
func (g *group) policy() *GroupConfig { return g.cfg.Load() }

// setConfig makes cfg the group's settings, if they changed.
func (g *group) setConfig(cfg *GroupConfig) {
	if old := g.cfg.Load(); reflect.DeepEqual(old, cfg) {
		return
	}
	c := *cfg
	g.mu.Lock()
	g.cfg.Store(&c)
	if g.keyOrdered {
		g.setMaxPerKey()
	}
	g.mu.Unlock()
	g.b.log.Info("event: group settings changed", "topic", g.topic, "group", g.name, "member", g.member)
}

// refreshConfig reads the group's settings from the store (run with each
// lease renewal), so that an update made by another process reaches this
// member within one renewal.
func (g *group) refreshConfig(ctx context.Context) {
	cfg, err := g.b.cfg.Groups.GroupConfig(ctx, g.cfgKey.topic, g.cfgKey.group)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrNotFound) {
			g.b.log.Warn("event: read group settings failed", "topic", g.topic, "group", g.name, "err", err)
		}
		return
	}
	cfg.setDefaults(g.cfgKey.topic)
	g.setConfig(&cfg)
}

// liveMembers returns the live members of group on topic: those the store
// lists (every process), or, over a store that is not a [Lister], this
// Bus's member when it has subscribers of the group.
func (b *Bus) liveMembers(ctx context.Context, topic, group string) ([]string, error) {
	var ms []string
	if l, ok := b.store.(Lister); ok {
		gs, err := l.ListGroups(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("event: list groups of %q: %w", topic, err)
		}
		for _, g := range gs {
			if g.Group == group {
				ms = g.Members
			}
		}
	}
	b.mu.Lock()
	g := b.groups[groupKey{topic, group}]
	b.mu.Unlock()
	if g != nil && len(ms) == 0 {
		ms = []string{g.member}
	}
	return ms, nil
}
