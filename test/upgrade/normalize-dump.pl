#!/usr/bin/perl
# Reads `pg_dump --schema-only --binary-upgrade` (the one mode in which
# pg_dump writes an extension's member objects) and prints pg_inbox's part of
# it with what legitimately differs between two databases left out: object
# ids, frozen xids, sequence positions, the dump's restrict key. Entries are
# sorted so that only the catalog, not the dump order, can make a difference.
use strict;
use warnings;

my (@entries, $header, @body);
sub flush_entry {
    return unless defined $header;
    push @entries, join("\n", $header, @body) if $header =~ /Schema: inbox$|^(pg_inbox|inbox);|^(SCHEMA inbox|EXTENSION pg_inbox);/;
}
while (my $line = <STDIN>) {
    chomp $line;
    if ($line =~ /^-- Name: (.*)$/) {
        flush_entry();
        ($header, @body) = ($1);
        $header =~ s/; Owner: .*//;
        next;
    }
    next if $line =~ /^--/ || $line =~ /^\s*$/ || $line =~ /^\\(un)?restrict /;
    next if $line =~ /binary_upgrade_set_/ || $line =~ /pg\.dropped/;
    next if $line =~ /^UPDATE pg_catalog\.pg_class$|^SET relfrozenxid|^WHERE oid = /;
    next if $line =~ /^SELECT pg_catalog\.(setval|set_config)\(/ || $line =~ /^SET \w+ = /;
    # The extension's own row: its name, schema and version count, its config OIDs do not.
    $line =~ s/binary_upgrade_create_empty_extension\('([^']*)', '([^']*)', (\w+), '([^']*)', .*\);/create_empty_extension($1, $2, $3, $4)/;
    push @body, $line if defined $header;
}
flush_entry();
print "$_\n" for sort @entries;
