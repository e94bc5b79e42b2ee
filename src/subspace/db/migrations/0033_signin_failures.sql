-- Failed sign-ins by client address, kept where every web process of a server sees them: a
-- process of its own counted only the failures it was sent, so N processes let an address
-- try N times as many codes. Unlogged: a crash forgets them, as a restart did before.
create unlogged table kb.signin_failures (
    address text not null,
    failed_at timestamptz not null default clock_timestamp()
);
create index signin_failures_address on kb.signin_failures (address, failed_at);
create index signin_failures_age on kb.signin_failures (failed_at);
