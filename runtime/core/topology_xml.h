/* A check of an hwloc XML file before hwloc reads it: hwloc trusts its XML
 * and crashes on some malformed files, while LOCUS_TOPOLOGY is user input
 * that must fail with a status instead. */
#ifndef LOCUS_RUNTIME_TOPOLOGY_XML_H
#define LOCUS_RUNTIME_TOPOLOGY_XML_H

#include <locus/locus.h>

/* LOCUS_ERROR_TOPOLOGY, naming the file and the line, when the file cannot
 * be read, is larger than hwloc's XML needs to be, or holds what hwloc 2.9's
 * importer crashes on (both found by fuzz_topology): a cpuset or nodeset
 * that is not comma-separated hex words (an assertion in
 * hwloc_bitmap_sscanf), or an object with a cpuset but no complete_cpuset,
 * or a nodeset but no complete_nodeset (a NULL dereference). */
locus_status locus__topology_xml_check(const char *path);

#endif
