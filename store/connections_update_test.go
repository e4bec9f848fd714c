package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestUpdateConnectionAddress(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		c, key := mustCreateConnection(t, s, "demo", EnvDev)
		oldPins := c.HostKeys
		clock.Advance(time.Minute)

		// Address only: the pins stay.
		got, err := s.UpdateConnectionAddress(ctx, Unaudited(), "demo", "127.0.0.1", 40022, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != c.ID || got.Addr() != "127.0.0.1:40022" {
			t.Errorf("got %s %s; want %s 127.0.0.1:40022", got.ID, got.Addr(), c.ID)
		}
		if !slices.Equal(got.HostKeys, oldPins) {
			t.Errorf("pins: got %v; want %v kept", got.HostKeys, oldPins)
		}
		if !got.ModifiedAt.Equal(clock.Now()) || !got.CreatedAt.Equal(c.CreatedAt) {
			t.Errorf("times: got created %v modified %v; want %v and %v", got.CreatedAt, got.ModifiedAt, c.CreatedAt, clock.Now())
		}

		// New pins replace the old ones, normalised.
		host := newTestKeyPair(t, "")
		got, err = s.UpdateConnectionAddress(ctx, Unaudited(), "demo", "localhost", 2200, []string{"  " + host.knownHostsLine("[localhost]:2200") + " "})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{host.knownHostsLine("[localhost]:2200")}
		if !slices.Equal(got.HostKeys, want) || got.Addr() != "localhost:2200" {
			t.Errorf("got %s %v; want localhost:2200 %v", got.Addr(), got.HostKeys, want)
		}

		// The sealed key is untouched.
		signer, err := s.ConnectionSigner(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(signer.PublicKey().Marshal(), key.signer.PublicKey().Marshal()) {
			t.Error("ConnectionSigner: got a different key after the update")
		}
	})
}

func TestUpdateConnectionAddressErrors(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		c, _ := mustCreateConnection(t, s, "demo", EnvDev)
		tests := []struct {
			name     string
			alias    string
			host     string
			port     int
			hostKeys []string
			want     error
		}{
			{name: "unknown alias", alias: "nope", host: "h", port: 22, want: ErrNotFound},
			{name: "empty host", alias: "demo", host: "", port: 22, want: ErrInvalid},
			{name: "host with space", alias: "demo", host: "a b", port: 22, want: ErrInvalid},
			{name: "port too high", alias: "demo", host: "h", port: 65536, want: ErrInvalid},
			{name: "negative port", alias: "demo", host: "h", port: -1, want: ErrInvalid},
			{name: "bad host key", alias: "demo", host: "h", port: 22, hostKeys: []string{"not a key"}, want: ErrInvalid},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := s.UpdateConnectionAddress(ctx, Unaudited(), tt.alias, tt.host, tt.port, tt.hostKeys)
				if !errors.Is(err, tt.want) {
					t.Errorf("got %v; want %v", err, tt.want)
				}
			})
		}
		got, err := s.ConnectionByAlias(ctx, "demo")
		if err != nil {
			t.Fatal(err)
		}
		if got.Addr() != c.Addr() || !slices.Equal(got.HostKeys, c.HostKeys) || !got.ModifiedAt.Equal(c.ModifiedAt) {
			t.Errorf("after failed updates: got %s %v; want %s %v unchanged", got.Addr(), got.HostKeys, c.Addr(), c.HostKeys)
		}
	})
}
