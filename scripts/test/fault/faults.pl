# Faults from the kernel (make fault-check, scripts/test/fault-check.sh): one
# server (stock 18.6 or the series) with one io_method, its data directory
# on a faultfs mount (scripts/test/fault/faultfs.c), its WAL on a normal
# directory.  For each writer (an immediate checkpoint, a spread checkpoint,
# the background writer, a backend's eviction, a COPY's strategy ring) it
# makes one table's file fail with EIO and with ENOSPC on write, and with
# EIO on fsync; and it makes reads of a table fail with EIO.  It checks that
# the statement or process that hits the error fails with a message naming
# the blocks and the file, that the server goes on (or, for fsync, PANICs
# and crash recovery brings back every acknowledged row), that no buffer of
# the table stays pinned, that the next checkpoint succeeds once the fault is
# cleared, and that after a crash amcheck and pg_checksums are clean.
#
# Run by scripts/test/fault-check.sh through prove, as the build user, with:
#   FAULT_SERVER     label of the server (stock, series)
#   FAULT_INSTALL    its installation (install_path of the node)
#   FAULT_IO_METHOD  worker, io_uring or sync
#   FAULT_MOUNT      the faultfs mount point (TESTDATADIR is below it)
#   FAULT_CONTROL    faultfs's control file, FAULT_HITS its hit log
#   FAULT_WALDIR     a normal directory for pg_wal
#   FAULT_SCRATCH    a normal directory for COPY's input
#   FAULT_RESULTS    file to append one tab-separated line per case to
#   FAULT_ONLY       optional: regexp of "writer/fault" cases to run
# No timing is asserted: every wait polls for a log line or a query result,
# with the harness's timeout (PG_TEST_TIMEOUT_DEFAULT).
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my %cfg;
for my $k (qw(server install io_method mount control hits waldir scratch results))
{
	$cfg{$k} = $ENV{ 'FAULT_' . uc($k) };
	die "FAULT_\U$k\E is not set\n" unless defined $cfg{$k};
}
my $only = $ENV{FAULT_ONLY};
my $timeout = $PostgreSQL::Test::Utils::timeout_default;

# shared_buffers = 8MB: 1024 buffers, few enough that the tables below
# outgrow them, and enough that a process may pin 16 at once (a buffer
# pool gives each process NBuffers / (MaxBackends + auxiliary processes),
# ~22 here), so that the series writes runs of up to io_combine_limit.
# The filler table (1 row per page) is 3 times larger, so that reading it
# through its index evicts every other buffer; COPY's ring is NBuffers / 8
# = 128 buffers.
my $nbuffers = 1024;
my $filler_pages = 3000;
my $table_rows = 600;    # ~38 pages at fillfactor 50
my $copy_rows = 6000;    # ~360 pages

my $name = "$cfg{server}_$cfg{io_method}";
my $node =
  PostgreSQL::Test::Cluster->new($name, install_path => $cfg{install});
$node->init(
	extra => [ '--data-checksums', '--waldir' => "$cfg{waldir}/$name" ]);
$node->append_conf(
	'postgresql.conf', qq{
fsync = on
data_sync_retry = off
wal_level = replica
io_method = $cfg{io_method}
shared_buffers = 8MB
max_connections = 5
autovacuum_worker_slots = 1
max_worker_processes = 2
max_wal_senders = 0
autovacuum = off
# only the writer under test writes: no bgwriter (but in its own cases),
# no timed checkpoint
bgwriter_lru_maxpages = 0
bgwriter_delay = 10ms
bgwriter_lru_multiplier = 10
checkpoint_timeout = 1h
max_wal_size = 4GB
# a spread checkpoint (pg_backup_start(fast => false)) paced over ~4 s
checkpoint_completion_target = 0.001
log_checkpoints = on
log_line_prefix = '%m [%p] %b %q%a '
restart_after_crash = off
});
$node->start;

# the data directory as faultfs sees it (the path inside the mount)
my $pgdata_in_mount = $node->data_dir;
$pgdata_in_mount =~ s{^\Q$cfg{mount}\E}{}
  or die "data directory " . $node->data_dir . " is not under $cfg{mount}\n";

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION amcheck;
CREATE EXTENSION pg_buffercache;
CREATE TABLE filler (id int NOT NULL, pad text NOT NULL) WITH (fillfactor = 10);
INSERT INTO filler SELECT g, repeat('f', 700) FROM generate_series(1, $filler_pages) g;
CREATE INDEX filler_id ON filler (id);
-- another table, not faulted: writes to it must go on working
CREATE TABLE other (id serial PRIMARY KEY, note text);
CHECKPOINT;
});
my $dboid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'postgres'");
my $postmaster_pid = postmaster_pid();

# acknowledged contents, per table: id => v, as the client saw them
# committed
my %acked;
my @results;

# ----------------------------------------------------------------
# faults and logs
# ----------------------------------------------------------------

# Replace the control file atomically; faultfs applies it from the next
# operation on.
sub set_faults
{
	my @rules = @_;
	my $tmp = "$cfg{control}.tmp";
	open my $fh, '>', $tmp or die "$tmp: $!";
	print $fh map { "$_\n" } @rules;
	close $fh or die "$tmp: $!";
	rename $tmp, $cfg{control} or die "rename $tmp: $!";
	note "faults: " . (@rules ? join('; ', @rules) : 'none');
}

sub hits_offset { return -s $cfg{hits} // 0; }

# the hit log's lines since offset, parsed
sub hits_since
{
	my ($offset) = @_;
	my @hits;
	open my $fh, '<', $cfg{hits} or return ();
	seek $fh, $offset, 0;
	while (my $line = <$fh>)
	{
		chomp $line;
		my %h = $line =~ /(\w+)=(\S+)/g;
		($h{cmd}) = $line =~ / cmd=(.*)$/;
		push @hits, \%h;
	}
	close $fh;
	return @hits;
}

sub log_offset { return -s $node->logfile; }

sub log_since
{
	my ($offset) = @_;
	return substr(slurp_file($node->logfile), $offset);
}

# Poll the server log from offset for a regexp; returns the match (the
# whole line) or undef after the timeout.
sub wait_log
{
	my ($re, $offset, $secs) = @_;
	$secs //= $timeout;
	my $end = time() + $secs;
	while (1)
	{
		my $log = log_since($offset);
		if ($log =~ /^(.*$re.*)$/m)
		{
			return $1;
		}
		return undef if time() > $end;
		usleep(50_000);
	}
}

# the error lines of the server log since offset that match re, as
# "backend type: LEVEL: message"
my $btype =
  qr/(checkpointer|background writer|client backend|io worker|postmaster|startup|walwriter)/;

sub log_errors
{
	my ($re, $offset) = @_;
	my @lines;
	for my $line (split /\n/, log_since($offset))
	{
		next unless $line =~ /\] $btype .*?\b(LOG|WARNING|ERROR|FATAL|PANIC):  (.*)$/;
		my ($who, $level, $msg) = ($1, $2, $3);
		push @lines, "$who: $level: $msg" if $msg =~ $re;
	}
	return @lines;
}

# psql that never dies: (rc, stdout, stderr, timed_out); rc -1 on timeout
sub psql_t
{
	my ($sql, $secs) = @_;
	my ($out, $err, $timed_out) = ('', '', 0);
	my $rc = $node->psql(
		'postgres', $sql,
		stdout => \$out,
		stderr => \$err,
		timeout => $secs // $timeout,
		timed_out => \$timed_out);
	$rc = -1 if $timed_out;
	return ($rc, $out, $err, $timed_out);
}

sub postmaster_pid
{
	open my $fh, '<', $node->data_dir . '/postmaster.pid' or return undef;
	my $pid = <$fh>;
	close $fh;
	chomp $pid;
	return $pid;
}

# ----------------------------------------------------------------
# tables
# ----------------------------------------------------------------

# A new table of $table_rows rows, checkpointed clean; returns the path of
# its main fork inside the mount.
sub new_table
{
	my ($t, $rows) = @_;
	$rows //= $table_rows;
	$node->safe_psql(
		'postgres', qq{
DROP TABLE IF EXISTS $t;
CREATE TABLE $t (id int PRIMARY KEY, v int NOT NULL, pad text NOT NULL)
  WITH (fillfactor = 50);
INSERT INTO $t SELECT g, 0, repeat('x', 200) FROM generate_series(1, $rows) g;
CHECKPOINT;
});
	$acked{$t} = { map { $_ => 0 } 1 .. $rows };
	return table_path($t);
}

sub table_path
{
	my ($t) = @_;
	return "$pgdata_in_mount/"
	  . $node->safe_psql('postgres', "SELECT pg_relation_filepath('$t')");
}

# An acknowledged change of every row: v = v + 1.
sub update_all
{
	my ($t) = @_;
	my ($rc, $out, $err) = psql_t("UPDATE $t SET v = v + 1");
	die "UPDATE $t failed: $err" if $rc != 0;
	$acked{$t}{$_}++ for keys %{ $acked{$t} };
}

# An acknowledged change of some rows.
sub update_some
{
	my ($t, $mod, $add) = @_;
	my ($rc, $out, $err) =
	  psql_t("UPDATE $t SET v = v + $add WHERE id % $mod = 0");
	return 0 if $rc != 0;
	$acked{$t}{$_} += $add for grep { $_ % $mod == 0 } keys %{ $acked{$t} };
	return 1;
}

sub buffers
{
	my ($t, $what) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM pg_buffercache
 WHERE reldatabase = $dboid AND relforknumber = 0
   AND relfilenode = pg_relation_filenode('$t') AND $what});
}

sub dirty_buffers { return buffers($_[0], 'isdirty'); }

# Wait until no buffer is pinned, of t or of any other relation (the
# server is idle but for this query, which pins none); returns what stays
# pinned after the timeout ('' is fine).
sub wait_unpinned
{
	my ($t) = @_;
	my $end = time() + $timeout;
	while (1)
	{
		my $n = $node->safe_psql(
			'postgres', qq{
SELECT coalesce(string_agg(format('%s buffers of %s', n, rel), ', '), '')
  FROM (SELECT coalesce(c.relname, 'relfilenode ' || b.relfilenode) AS rel,
               count(*) AS n
          FROM pg_buffercache b
          LEFT JOIN pg_class c
            ON b.reldatabase = $dboid AND c.relfilenode = b.relfilenode
         WHERE b.pinning_backends > 0
         GROUP BY 1) p});
		return '' if $n eq '';
		return $n if time() > $end;
		usleep(50_000);
	}
}

# Evict every buffer of t (flushing the dirty ones): none may be pinned or
# stay in progress.  Returns problems.
sub check_evict
{
	my ($t) = @_;
	my ($rc, $out, $err, $to) = psql_t(
		"SELECT buffers_evicted || ' ' || buffers_skipped FROM pg_buffercache_evict_relation('$t')"
	);
	return ("pg_buffercache_evict_relation('$t'): " . ($to ? 'timeout' : $err))
	  if $rc != 0;
	my ($evicted, $skipped) = split ' ', $out;
	return ("pg_buffercache_evict_relation('$t') skipped $skipped buffers")
	  if $skipped != 0;
	return ();
}

# The table's contents as acknowledged, and as the server returns them.
sub expected_rows
{
	my ($t) = @_;
	my $h = $acked{$t};
	return join(',', map { "$_:$h->{$_}" } sort { $a <=> $b } keys %$h);
}

sub actual_rows
{
	my ($t) = @_;
	my ($rc, $out, $err) = psql_t(
		"SELECT coalesce(string_agg(id || ':' || v, ',' ORDER BY id), '') FROM $t"
	);
	return $rc == 0 ? $out : "ERROR: $err";
}

# Compare the table with what was acknowledged; returns a list of problems.
sub check_rows
{
	my ($t, $when) = @_;
	my $exp = expected_rows($t);
	my $act = actual_rows($t);
	return () if $exp eq $act;
	my %a = map { split /:/ } grep { /:/ } split /,/, $act;
	my @missing = grep { !exists $a{$_} } keys %{ $acked{$t} };
	my @wrong = grep { exists $a{$_} && $a{$_} != $acked{$t}{$_} }
	  keys %{ $acked{$t} };
	my @extra = grep { !exists $acked{$t}{$_} } keys %a;
	return (
		sprintf(
			"%s: %s: %d acknowledged rows missing, %d with another value, %d unexpected%s",
			$when, $t, scalar(@missing), scalar(@wrong), scalar(@extra),
			$act =~ /^ERROR/ ? " ($act)" : ''));
}

# amcheck of the heap and its primary key
sub check_amcheck
{
	my ($t) = @_;
	my ($rc, $out, $err) = psql_t(
		qq{SELECT count(*) FROM verify_heapam('$t');
SELECT bt_index_check('${t}_pkey', true);});
	return ("amcheck of $t failed: $err") if $rc != 0;
	my ($n) = split /\n/, $out;
	return ("verify_heapam('$t') reports $n problems") if $n != 0;
	return ();
}

# The server must be up, the same postmaster, and answer reads and writes.
sub check_alive
{
	my ($offset) = @_;
	my @problems;
	my $pid = postmaster_pid();
	push @problems, "postmaster changed or gone"
	  if !defined $pid || $pid ne $postmaster_pid || !kill(0, $pid);
	my ($rc, $out, $err) =
	  psql_t("INSERT INTO other (note) VALUES ('alive') RETURNING id");
	push @problems, "a write to another table failed: $err" if $rc != 0;
	my $log = log_since($offset);
	push @problems, "the server crashed or restarted: $1"
	  if $log =~
	  /^(.*(?:terminated by signal|exited with exit code|terminating any other active server processes|all server processes terminated).*)$/m;
	return @problems;
}

# ----------------------------------------------------------------
# writers: make the writer write table t (with whatever fault is armed)
# ----------------------------------------------------------------

# Evict buffers by reading the filler through its index (no ring), in
# rounds, until done->() says so.  Returns the errors the reads raised.
sub read_filler
{
	my ($done, %opts) = @_;
	my $per_round = $opts{paced} ? 64 : $nbuffers;
	my @errors;
	my $end = time() + $timeout;
	my $lo = 1;
	while (!$done->())
	{
		return (@errors, 'TIMEOUT') if time() > $end;
		my $sql;
		if ($opts{paced})
		{
			# 32 pages, then a nap: the bgwriter, every 10 ms, cleans
			# ahead of the clock hand
			$sql = qq{SET enable_seqscan = off; SET enable_bitmapscan = off;
DO \$\$
DECLARE s bigint;
BEGIN
  FOR i IN 0..19 LOOP
    SELECT sum(length(pad)) INTO s FROM filler
     WHERE id BETWEEN ($lo + i * $per_round) % $filler_pages
                  AND ($lo + i * $per_round) % $filler_pages + $per_round - 1;
    PERFORM pg_sleep(0.02);
  END LOOP;
END \$\$;};
			$lo = ($lo + 20 * $per_round) % $filler_pages;
		}
		else
		{
			my $hi = $lo + $per_round - 1;
			$sql = qq{SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT sum(length(pad)) FROM filler WHERE id BETWEEN $lo AND $hi;};
			$lo = ($hi + 1) % $filler_pages;
		}
		my ($rc, $out, $err) = psql_t($sql);
		if ($rc != 0)
		{
			push @errors, $err;
			last if $opts{stop_on_error};
		}
	}
	return @errors;
}

# Each writer: (trigger, expect).  trigger($t, $fault, $offset) makes the
# writer write t; it returns a hash: what ran, its rc and stderr.
my %writers = (
	'ckpt-immediate' => sub {
		my ($t) = @_;
		my ($rc, $out, $err) = psql_t('CHECKPOINT');
		return (what => 'CHECKPOINT', rc => $rc, err => $err, who => 'checkpointer');
	},
	'ckpt-spread' => sub {
		my ($t) = @_;
		# pg_backup_start(fast => false) requests a spread checkpoint and
		# waits for it; the backup ends in the same session
		my ($rc, $out, $err) = psql_t(
			qq{SELECT pg_backup_start('fault', false) IS NOT NULL;
SELECT pg_backup_stop(false) IS NOT NULL;});
		return (
			what => 'pg_backup_start(fast => false)',
			rc => $rc,
			err => $err,
			who => 'checkpointer');
	},
	'bgwriter' => sub {
		my ($t, $fault, $offset) = @_;
		my @errors;
		if ($fault =~ /^write/)
		{
			# until the bgwriter has logged the write error
			@errors = read_filler(
				sub {
					return grep { /^background writer: ERROR: / }
					  log_errors(qr/could not write/, $offset);
				},
				paced => 1);
		}
		else
		{
			# until it (or a backend) has written every dirty buffer of t
			@errors =
			  read_filler(sub { dirty_buffers($t) == 0 }, paced => 1);
		}
		return (
			what => 'index scans of another table (bgwriter at 10 ms)',
			rc => (grep { $_ eq 'TIMEOUT' } @errors) ? -1 : 0,
			err => join('', grep { $_ ne 'TIMEOUT' } @errors),
			who => 'background writer');
	},
	'backend' => sub {
		my ($t, $fault) = @_;
		my @errors;
		if ($fault =~ /^write/)
		{
			@errors = read_filler(sub { 0 }, stop_on_error => 1);
		}
		else
		{
			@errors = read_filler(sub { dirty_buffers($t) == 0 });
		}
		my $timed_out = grep { $_ eq 'TIMEOUT' } @errors;
		return (
			what => 'index scan of another table (evicts t)',
			rc => $timed_out ? -1 : (@errors ? 1 : 0),
			err => join('', grep { $_ ne 'TIMEOUT' } @errors),
			who => 'client backend');
	},
	'copy-ring' => sub {
		my ($t, $fault) = @_;
		my $base = 1 + (sort { $b <=> $a } keys %{ $acked{$t} })[0];
		my $file = "$cfg{scratch}/copy_$name.data";
		open my $fh, '>', $file or die "$file: $!";
		print $fh "$_\t0\t" . ('c' x 200) . "\n"
		  for $base .. $base + $copy_rows - 1;
		close $fh;
		my ($rc, $out, $err) = psql_t("COPY $t FROM '$file'");
		if ($rc == 0)
		{
			$acked{$t}{$_} = 0 for $base .. $base + $copy_rows - 1;
		}
		return (
			what => "COPY $t FROM file ($copy_rows rows)",
			rc => $rc,
			err => $err,
			who => 'client backend');
	},);

# The checkpoint that pg_backup_start(fast => false) ran was a spread one.
sub spread_check
{
	my ($offset) = @_;
	my $start = log_since($offset) =~ /checkpoint starting: ([^\n]*)/ ? $1 : undef;
	return ("no spread checkpoint ("
		  . ($start ? "checkpoint starting: $start" : 'no "checkpoint starting" line')
		  . ')')
	  if !defined $start || $start =~ /immediate/;
	return ();
}

# The bgwriter writes only in its own cases: on before the fault is armed
# (a query under the fault may fail), off after it is cleared.
my $bg_clean;

sub bgwriter_on
{
	$node->append_conf('postgresql.conf', 'bgwriter_lru_maxpages = 1000');
	$node->reload;
	wait_setting('bgwriter_lru_maxpages', '1000');
	$bg_clean = $node->safe_psql('postgres',
		'SELECT buffers_clean FROM pg_stat_bgwriter');
}

sub bgwriter_off
{
	$node->append_conf('postgresql.conf', 'bgwriter_lru_maxpages = 0');
	$node->reload;
	wait_setting('bgwriter_lru_maxpages', '0');
	return 'bgwriter buffers_clean +'
	  . ($node->safe_psql('postgres',
			'SELECT buffers_clean FROM pg_stat_bgwriter') - $bg_clean);
}

sub wait_setting
{
	my ($guc, $value) = @_;
	$node->poll_query_until('postgres', "SHOW $guc", $value)
	  or die "$guc did not become $value";
}

# ----------------------------------------------------------------
# the cases
# ----------------------------------------------------------------

sub record
{
	my ($writer, $fault, $problems, %info) = @_;
	my $result = @$problems ? 'FAIL' : 'pass';
	my @fields = (
		$cfg{server}, $cfg{io_method}, $writer, $fault, $result,
		$info{hit_by} // '-',
		$info{failed} // '-',
		$info{message} // '-',
		join(' | ', @$problems, ($info{note} // ())));
	s/[\t\n]+/ /g for @fields;
	open my $fh, '>>', $cfg{results} or die "$cfg{results}: $!";
	print $fh join("\t", @fields) . "\n";
	close $fh;
	ok(!@$problems, "$name $writer $fault")
	  or diag(join("\n", @$problems));
	diag(sprintf("%-6s %-8s %-15s %-18s %-4s  %s",
			$cfg{server}, $cfg{io_method}, $writer, $fault, $result,
			$info{message} // '-'));
}

sub selected
{
	my ($writer, $fault) = @_;
	return !defined $only || "$writer/$fault" =~ /$only/;
}

# who got the faults: "process title xN" from the hit log
sub hit_summary
{
	my (@hits) = @_;
	my %by;
	for my $h (@hits)
	{
		my $cmd = $h->{cmd} // '?';
		$cmd =~ s/^postgres: (?:\S+: )?//;
		$cmd = 'client backend' if $cmd =~ /\[local\]/;
		$cmd .= ' (io_uring worker thread)' if ($h->{comm} // '') =~ /^iou-wrk/;
		my $blocks = $h->{op} eq 'fsync' ? '' : " blocks $h->{blocks}";
		$blocks .= " (short write of $h->{short} of $h->{len} bytes)" if $h->{short};
		$by{"$h->{op} by $cmd$blocks"}++;
	}
	return join(', ', map { $by{$_} > 1 ? "$_ x$by{$_}" : $_ } sort keys %by);
}

# A write fault on table t while writer writes it: EIO, ENOSPC, or
# ENOSPC-short (the first failing write is a short one, as when a file
# system fills up, and leaves a torn block on disk; the retry fails with
# ENOSPC).
sub write_case
{
	my ($writer, $kind) = @_;
	my $fault = "write-$kind";
	my ($errno, $short) = $kind =~ /^(\w+?)(-short)?$/;
	my $t = 't_' . ($writer =~ s/-/_/gr);
	my $path = table_path($t);
	my @problems;
	my %info;

	# COPY writes new blocks through its ring; the others write blocks
	# this UPDATE dirtied
	if ($writer ne 'copy-ring')
	{
		update_all($t);
		push @problems, "precondition: no dirty buffer of $t before the writer ran"
		  if dirty_buffers($t) == 0;
	}

	bgwriter_on() if $writer eq 'bgwriter';
	my $hoff = hits_offset();
	my $loff = log_offset();
	set_faults("write $errno $path"
		  . ($writer eq 'copy-ring' ? ' overwrite' : '')
		  . ($short ? ' short=20480' : ''));
	my %r = $writers{$writer}->($t, $fault, $loff);
	set_faults();
	$r{note} = bgwriter_off() if $writer eq 'bgwriter';
	push @problems, spread_check($loff) if $writer eq 'ckpt-spread';

	my @hits = grep { $_->{path} eq $path } hits_since($hoff);
	$info{hit_by} = hit_summary(@hits) || 'none';
	push @problems, "the fault was never hit (no failed write of $path)"
	  unless grep { !$_->{short} } @hits;
	push @problems, "no short write of $path" if $short && !grep { $_->{short} } @hits;
	push @problems, "the writer timed out" if $r{rc} == -1;

	my $relpath = substr($path, length($pgdata_in_mount) + 1);
	my $errtext =
	  $errno eq 'EIO' ? 'Input/output error' : 'No space left on device';
	my $re_msg =
	  qr/could not write blocks? (\d+)(?:\.\.(\d+))? in file "\Q$relpath\E": \Q$errtext\E/;

	# the error as the server logged it, from the writer's process
	my @lines = log_errors($re_msg, $loff);
	my @own = grep { /^\Q$r{who}\E: ERROR: / } @lines;
	if (!@own && $r{who} ne 'client backend')
	{
		# the process reports it when it reaps the write: wait for that
		wait_log(qr/\] \Q$r{who}\E .*ERROR:  $re_msg/, $loff);
		@lines = log_errors($re_msg, $loff);
		@own = grep { /^\Q$r{who}\E: ERROR: / } @lines;
	}
	push @problems, "no ERROR from the $r{who} naming the blocks and file"
	  unless @own;
	if (@own)
	{
		$own[0] =~ /$re_msg/;
		my ($first, $last) = ($1, $2 // $1);
		my $nblocks =
		  $node->safe_psql('postgres', "SELECT pg_relation_size('$t') / 8192");
		push @problems, "the message names blocks $first..$last, beyond the $nblocks of $t"
		  if $last >= $nblocks || $first > $last;
		my $hit_covers = grep {
			my ($a, $b) = split /-/, $_->{blocks};
			!$_->{short} && $a <= $last && $b >= $first
		} @hits;
		push @problems, "no failed write of blocks $first..$last in the hit log"
		  unless $hit_covers;
		($info{message} = $own[0]) =~ s/^(.*?): (\w+): /$1: $2:  /;
	}
	$info{note} = join('; ', grep { defined } $r{note},
		@lines > @own ? 'also logged: ' . join(' / ', grep { !/^\Q$r{who}\E: ERROR: / } @lines) : undef);

	# the statement (or checkpoint request) that hit it fails
	if ($writer =~ /^ckpt/)
	{
		$info{failed} = "$r{what}: " . ($r{err} =~ /(ERROR:  .*)/ ? $1 : "rc=$r{rc}");
		push @problems, "$r{what} did not fail" if $r{rc} == 0;
		push @problems, "$r{what} failed without 'checkpoint request failed': $r{err}"
		  if $r{rc} > 0 && $r{err} !~ /checkpoint request failed/;
	}
	elsif ($writer eq 'bgwriter')
	{
		$info{failed} = 'background writer (no statement)';
		$info{failed} .= "; a backend also hit it: $1"
		  if $r{err} =~ /(ERROR:  .*)/;
	}
	else
	{
		$info{failed} = "$r{what}: " . ($r{err} =~ /(ERROR:  .*)/ ? $1 : "rc=$r{rc}");
		push @problems, "$r{what} did not fail" if $r{rc} == 0;
		push @problems, "$r{what} failed with another error: $r{err}"
		  if $r{rc} > 0 && $r{err} !~ $re_msg;
	}

	push @problems, check_alive($loff);
	my $pinned = wait_unpinned($t);
	push @problems, "still pinned: $pinned" if $pinned ne "";

	if ($short)
	{
		# a block may be torn on disk: crash before any checkpoint, and
		# recovery must restore it from the full page image in WAL
		$node->stop('immediate');
		$node->start;
		$postmaster_pid = postmaster_pid();
		push @problems, check_rows($t, 'after a crash with a torn block');
		push @problems, check_amcheck($t);
	}

	# cleared: the next checkpoint succeeds, nothing is lost
	my ($rc, $out, $err, $to) = psql_t('CHECKPOINT');
	push @problems, "CHECKPOINT after clearing the fault failed: "
	  . ($to ? 'timeout' : $err)
	  if $rc != 0;
	push @problems, dirty_buffers($t) . " buffers of $t still dirty after that checkpoint"
	  if $rc == 0 && dirty_buffers($t) != 0;
	push @problems, check_evict($t);
	push @problems, check_rows($t, 'after the fault');
	update_some($t, 7, 100)
	  or push @problems, "an UPDATE of $t after the fault failed";

	record($writer, $fault, \@problems, %info);
	return @problems == 0;
}

# EIO on fsync of t: the checkpoint after writer wrote t PANICs; after
# clearing the fault, crash recovery brings back every acknowledged row.
sub fsync_case
{
	my ($writer) = @_;
	my $fault = 'fsync-EIO';
	my $t = 't_' . ($writer =~ s/-/_/gr);
	my $path = table_path($t);
	my @problems;
	my %info;

	update_all($t);
	my $loff = log_offset();
	my $hoff = hits_offset();
	my %r;
	my $ckpt;
	my @notes;

	if ($writer =~ /^ckpt/)
	{
		# the checkpoint writes t, then fsyncs it
		set_faults("fsync EIO $path");
		%r = $writers{$writer}->($t, $fault, $loff);
		$ckpt = $r{what};
		push @problems, spread_check($loff) if $writer eq 'ckpt-spread';
	}
	else
	{
		# the writer writes t (no fault), then a checkpoint fsyncs it: the
		# writer must have registered the fsync request
		bgwriter_on() if $writer eq 'bgwriter';
		%r = $writers{$writer}->($t, $fault, $loff);
		$r{note} = bgwriter_off() if $writer eq 'bgwriter';
		push @problems, "$r{what} failed: " . ($r{rc} == -1 ? 'timeout' : $r{err})
		  if $r{rc} != 0;
		push @notes, $r{note} if $r{note};
		push @notes, "dirty buffers of $t left for the checkpoint: " . dirty_buffers($t);
		set_faults("fsync EIO $path");
		my ($rc, $out, $err) = psql_t('CHECKPOINT');
		%r = (what => 'CHECKPOINT', rc => $rc, err => $err);
		$ckpt = 'CHECKPOINT';
	}

	my $panic = wait_log(qr/checkpointer .*PANIC:  could not fsync file "[^"]+": Input\/output error/, $loff);
	my @hits = grep { $_->{path} eq $path } hits_since($hoff);
	$info{hit_by} = hit_summary(@hits) || 'none';
	if (!$panic)
	{
		push @problems, "no PANIC: could not fsync file (checkpoint: rc=$r{rc} $r{err})";
		push @problems, "the checkpoint never fsynced $path" unless @hits;
	}
	else
	{
		($info{message} = $panic) =~ s/^.*?PANIC:  /checkpointer: PANIC:  /;
		my $relpath = substr($path, length($pgdata_in_mount) + 1);
		push @problems, "the PANIC names another file: $panic"
		  unless $panic =~ /"\Q$relpath\E"/;
		$info{failed} = "$ckpt: " . ($r{err} =~ /^(.*(?:closed the connection|terminat|ERROR).*)$/m ? $1 : "rc=$r{rc}");
	}

	# the postmaster goes down (restart_after_crash = off)
	my $end = time() + $timeout;
	usleep(50_000) while kill(0, $postmaster_pid) && time() < $end;
	if (kill(0, $postmaster_pid))
	{
		push @problems, "the server is still running after the fsync failure"
		  if $panic;
		$node->stop('immediate', fail_ok => 1);
	}
	$node->_update_pid(-1);
	set_faults();

	# crash recovery
	$loff = log_offset();
	if (!$node->start(fail_ok => 1))
	{
		push @problems, "the server did not start after the fault was cleared";
		record($writer, $fault, \@problems, %info, note => join('; ', @notes));
		return 0;
	}
	$postmaster_pid = postmaster_pid();
	push @notes, 'crash recovery: ' . ($1 // '?')
	  if log_since($loff) =~ /(redo done at \S+)/;
	push @problems, check_rows($t, 'after crash recovery');
	push @problems, check_amcheck($t);
	my $pinned = wait_unpinned($t);
	push @problems, "still pinned: $pinned" if $pinned ne "";

	$info{note} = join('; ', @notes);
	record($writer, $fault, \@problems, %info);
	return @problems == 0;
}

# After the write faults of a writer: crash, recover, check.
sub crash_check
{
	my ($writer) = @_;
	my $t = 't_' . ($writer =~ s/-/_/gr);
	my @problems;
	$node->stop('immediate');
	my $loff = log_offset();
	$node->start;
	$postmaster_pid = postmaster_pid();
	push @problems, check_rows($t, 'after a crash');
	push @problems, check_amcheck($t);
	return @problems;
}

# Stopped cleanly, every page of the cluster has a valid checksum.
sub checksums_check
{
	$node->stop('fast');
	my ($out, $err) = run_command(
		[ $node->installed_command('pg_checksums'), '--check', '--pgdata' => $node->data_dir ]);
	my $ok = $out =~ /Bad checksums:\s+0\b/ && $err eq '';
	$node->start;
	$postmaster_pid = postmaster_pid();
	my ($blocks) = $out =~ /Blocks scanned:\s+(\d+)/;
	return ($ok ? undef : "pg_checksums --check: $out $err", $blocks // '?');
}

sub read_case
{
	my ($reader) = @_;
	my $fault = 'read-EIO';
	my $t = 't_read';
	my $path = table_path($t);
	my @problems;
	my %info;

	my ($rc, $out, $err) = psql_t('CHECKPOINT');

	# one block in the middle of the table, read through the index
	my $block = int($table_rows / 17 / 2);
	my $id = $node->safe_psql('postgres',
		"SELECT min(id) FROM $t WHERE (ctid::text::point)[0] = $block");

	($rc, $out, $err) = psql_t("SELECT * FROM pg_buffercache_evict_relation('$t')");
	push @problems, "pg_buffercache_evict_relation failed: $err" if $rc != 0;
	push @problems, "precondition: buffers of $t still in shared buffers"
	  if buffers($t, 'true') != 0;

	my $hoff = hits_offset();
	my $loff = log_offset();
	my $sql;
	if ($reader eq 'reader-seqscan')
	{
		set_faults("read EIO $path");
		$sql = "SELECT count(*), sum(v) FROM $t";
	}
	else
	{
		set_faults("read EIO $path blocks=$block-$block");
		$sql = "SET enable_seqscan = off; SET enable_bitmapscan = off; SELECT v FROM $t WHERE id = $id";
	}
	($rc, $out, $err) = psql_t($sql);
	set_faults();

	my @hits = grep { $_->{path} eq $path } hits_since($hoff);
	$info{hit_by} = hit_summary(@hits) || 'none';
	push @problems, "the fault was never hit (no failed read of $path)"
	  unless @hits;
	my $relpath = substr($path, length($pgdata_in_mount) + 1);
	my $re_msg =
	  qr/could not read blocks? (\d+)(?:\.\.(\d+))? in file "\Q$relpath\E": Input\/output error/;
	$info{failed} = "$sql: " . ($err =~ /(ERROR:  .*)/ ? $1 : "rc=$rc");
	push @problems, "the read did not fail" if $rc == 0;
	if ($rc != 0)
	{
		if ($err =~ /ERROR:  ($re_msg)/)
		{
			$info{message} = "client backend: ERROR:  $1";
		}
		else
		{
			push @problems, "the read failed with another error: $err";
		}
	}
	my @other = grep { !/^client backend: ERROR: / } log_errors($re_msg, $loff);
	$info{note} = 'also logged: ' . join(' / ', @other) if @other;
	push @problems, check_alive($loff);
	my $pinned = wait_unpinned($t);
	push @problems, "still pinned: $pinned" if $pinned ne "";

	($rc, $out, $err) = psql_t("SELECT count(*) FROM $t");
	push @problems, "reading $t after clearing the fault failed: $err" if $rc != 0;
	push @problems, check_rows($t, 'after the read fault');
	push @problems, check_evict($t);
	record($reader, $fault, \@problems, %info);
}

# ----------------------------------------------------------------
# run
# ----------------------------------------------------------------

for my $writer ('ckpt-immediate', 'ckpt-spread', 'bgwriter', 'backend', 'copy-ring')
{
	my $t = 't_' . ($writer =~ s/-/_/gr);
	my @todo = grep { selected($writer, $_) }
	  qw(write-EIO write-ENOSPC write-ENOSPC-short fsync-EIO);
	next unless @todo;
	new_table($t, $writer eq 'copy-ring' ? 200 : $table_rows);

	my $wrote = 0;
	for my $fault (grep { /^write/ } @todo)
	{
		write_case($writer, $fault =~ s/^write-//r);
		$wrote++;
	}
	if ($wrote)
	{
		# the faults cleared and checkpointed: a crash loses nothing
		my @problems = crash_check($writer);
		record($writer, 'crash-after-write', \@problems);
	}
	fsync_case($writer) if grep { $_ eq 'fsync-EIO' } @todo;

	# every page of the cluster, t's included, then t goes
	my @problems;
	my ($bad, $blocks) = checksums_check();
	push @problems, $bad if defined $bad;
	my ($rc, $out, $err, $to) = psql_t("DROP TABLE $t");
	push @problems, "DROP TABLE $t: " . ($to ? 'timeout' : $err) if $rc != 0;
	record($writer, 'checksums+drop', \@problems,
		note => "pg_checksums --check: $blocks blocks");
}

my @readers = grep { selected($_, 'read-EIO') } ('reader-seqscan', 'reader-index');
if (@readers)
{
	new_table('t_read');
	read_case($_) for @readers;
	my @problems = check_amcheck('t_read');
	my ($bad, $blocks) = checksums_check();
	push @problems, $bad if defined $bad;
	my ($rc, $out, $err, $to) = psql_t("DROP TABLE t_read");
	push @problems, "DROP TABLE t_read: " . ($to ? 'timeout' : $err) if $rc != 0;
	record('reader', 'checksums+drop', \@problems,
		note => "amcheck; pg_checksums --check: $blocks blocks");
}

$node->stop('fast');
done_testing();
