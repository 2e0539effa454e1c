package sqlstore

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/blaiseagent/blaise-agent/internal/lifecycle"
)

// Prefixes of the dashboard's tokens.
const (
	SetupPrefix = "bls_" // creates the first admin, once
	WebPrefix   = "blw_" // a signed-in browser's cookie
)

// MinPassword is the shortest password a user may have.
const MinPassword = 12

// ErrBadSignIn is wrapped in the error for an unknown user or a wrong
// password: the two are not told apart.
var ErrBadSignIn = errors.New("wrong user name or password")

// argon2id parameters: OWASP's minimum (19 MiB, 2 passes, 1 lane). They
// are stored with each hash, so raising them later keeps old hashes valid.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// hashPassword is password's argon2id hash in the PHC string format.
func hashPassword(password string) string {
	salt := make([]byte, 16)
	rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// passwordMatches checks password against a hash of hashPassword.
func passwordMatches(hash, password string) (bool, error) {
	parts := strings.Split(hash, "$")
	var version int
	var memory, time uint32
	var threads uint8
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errors.New("not an argon2id hash")
	}
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, fmt.Errorf("argon2 version %q: want v=%d", parts[2], argon2.Version)
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil {
		return false, fmt.Errorf("argon2 parameters %q: %w", parts[3], err)
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, fmt.Errorf("argon2 salt: %w", err)
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		return false, fmt.Errorf("argon2 key: %w", err)
	}
	got := argon2.IDKey([]byte(password), salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// User is a person who signs in to the dashboard.
type User struct {
	Name    string
	Admin   bool
	Created time.Time
}

// HasUsers says whether any user exists.
func (s *userStore) HasUsers(ctx context.Context) (bool, error) {
	var n int
	if err := s.read.row(ctx, "SELECT COUNT(*) FROM users").Scan(&n); err != nil {
		return false, fmt.Errorf("users: %s: %w", s.where, err)
	}
	return n > 0, nil
}

// MintSetupToken returns a new setup token, replacing any earlier one,
// while no user exists; once one does, it returns "". The token is shown
// once, when it is minted; the store keeps its hash.
func (s *userStore) MintSetupToken(ctx context.Context) (string, error) {
	var tok string
	err := s.inTx(ctx, func(c conn) error {
		var n int
		if err := c.row(ctx, "SELECT COUNT(*) FROM users").Scan(&n); err != nil {
			return fmt.Errorf("setup token: %s: %w", s.where, err)
		}
		if n > 0 {
			return nil
		}
		tok = newToken(SetupPrefix)
		if _, err := c.exec(ctx, "DELETE FROM setup_tokens"); err != nil {
			return fmt.Errorf("setup token: %s: %w", s.where, err)
		}
		if _, err := c.exec(ctx, "INSERT INTO setup_tokens (hash, created) VALUES (?, ?)", hashToken(tok), s.now().UnixNano()); err != nil {
			return fmt.Errorf("setup token: %s: %w", s.where, err)
		}
		return nil
	})
	return tok, err
}

// checkUser refuses a bad name or a short password.
func checkUser(name, password string) error {
	if err := lifecycle.CheckName("user", name); err != nil {
		return err
	}
	if len(password) < MinPassword {
		return fmt.Errorf("user %s: the password has %d characters; want at least %d", name, len(password), MinPassword)
	}
	return nil
}

// CreateFirstAdmin spends the setup token on the first user, an admin.
// A wrong or spent token, or a store that has users, wraps ErrBadToken.
func (s *userStore) CreateFirstAdmin(ctx context.Context, setupToken, name, password string) (*User, error) {
	if err := checkToken("setup token", SetupPrefix, setupToken); err != nil {
		return nil, err
	}
	if err := checkUser(name, password); err != nil {
		return nil, err
	}
	u := &User{Name: name, Admin: true, Created: s.now()}
	hash := hashPassword(password)
	err := s.inTx(ctx, func(c conn) error {
		n, err := affected(c.exec(ctx, "DELETE FROM setup_tokens WHERE hash = ?", hashToken(setupToken)))
		if err != nil {
			return fmt.Errorf("setup token: %s: %w", s.where, err)
		}
		if n == 0 {
			return fmt.Errorf("setup token: %w: unknown or already used", ErrBadToken)
		}
		if _, err := c.exec(ctx, "INSERT INTO users (name, password, admin, created) VALUES (?, ?, 1, ?)", name, hash, u.Created.UnixNano()); err != nil {
			return fmt.Errorf("user %s: %s: %w", name, s.where, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// SignIn checks a user's password and opens a web session of ttl; it
// returns the session's token, shown once (the cookie), and its user.
func (s *userStore) SignIn(ctx context.Context, name, password string, ttl time.Duration) (string, *User, error) {
	if lifecycle.CheckName("user", name) != nil {
		return "", nil, ErrBadSignIn
	}
	var u User
	var hash string
	var admin, created int64
	err := s.read.row(ctx, "SELECT name, password, admin, created FROM users WHERE name = ?", name).Scan(&u.Name, &hash, &admin, &created)
	if errors.Is(err, sql.ErrNoRows) {
		hashPassword(password) // the same work as for a known user
		return "", nil, ErrBadSignIn
	}
	if err != nil {
		return "", nil, fmt.Errorf("user %s: %s: %w", name, s.where, err)
	}
	ok, err := passwordMatches(hash, password)
	if err != nil {
		return "", nil, fmt.Errorf("user %s: the stored password hash: %w", name, err)
	}
	if !ok {
		return "", nil, ErrBadSignIn
	}
	u.Admin, u.Created = admin != 0, fromNanos(created)
	tok := newToken(WebPrefix)
	now := s.now()
	if _, err := s.writer().exec(ctx, "INSERT INTO web_sessions (hash, user_name, created, expires) VALUES (?, ?, ?, ?)",
		hashToken(tok), name, now.UnixNano(), now.Add(ttl).UnixNano()); err != nil {
		return "", nil, fmt.Errorf("user %s: signing in: %s: %w", name, s.where, err)
	}
	return tok, &u, nil
}

// WebSession returns the user a web session's token signs in, or an error
// wrapping ErrBadToken for an unknown, signed-out or expired one.
func (s *userStore) WebSession(ctx context.Context, tok string) (*User, error) {
	if err := checkToken("sign-in", WebPrefix, tok); err != nil {
		return nil, err
	}
	var u User
	var admin, created, expires int64
	err := s.read.row(ctx, "SELECT u.name, u.admin, u.created, w.expires FROM web_sessions w JOIN users u ON u.name = w.user_name WHERE w.hash = ?",
		hashToken(tok)).Scan(&u.Name, &admin, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sign-in: %w: unknown or signed out", ErrBadToken)
	}
	if err != nil {
		return nil, fmt.Errorf("sign-in: %s: %w", s.where, err)
	}
	if !s.now().Before(fromNanos(expires)) {
		return nil, fmt.Errorf("sign-in: %w: expired at %s", ErrBadToken, fromNanos(expires).Format(time.RFC3339))
	}
	u.Admin, u.Created = admin != 0, fromNanos(created)
	return &u, nil
}

// SignOut ends a web session, and drops every expired one.
func (s *userStore) SignOut(ctx context.Context, tok string) error {
	if _, err := s.writer().exec(ctx, "DELETE FROM web_sessions WHERE hash = ? OR expires <= ?", hashToken(tok), s.now().UnixNano()); err != nil {
		return fmt.Errorf("signing out: %s: %w", s.where, err)
	}
	return nil
}
