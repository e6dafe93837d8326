/* nvtx_regions.h: the program's own NVTX ranges as cudapool regions
 * (regions.h), for a program that already marks its phases with
 * nvtxRangePushA/Pop or nvtxRangeStartA/End (PyTorch's
 * torch.cuda.nvtx.range, NVTX v2's libnvToolsExt, NVTX v3's header-only
 * client).
 *
 * Owns the decision (CUDAPOOL_NVTX_REGIONS, once at start) and cudapool's
 * side of the NVTX injection protocol. NVTX's calls reach a tool only
 * through the library NVTX_INJECTION64_PATH names (the header-only client
 * loads it at the program's first NVTX call); so, when that variable is
 * unset and no tool is attached, cudapool names itself there at start:
 * this library exports InitializeInjectionNvtx2, which the client calls and
 * which fills the client's range entries with functions that open and close
 * regions. Every other NVTX call of the program stays a no-op.
 *
 * Rules: never when a tool's library is named already (compute-sanitizer,
 * Nsight Systems: the ranges are theirs, and NVTX takes one tool), when
 * CUDAPOOL_NVTX is on (cudapool's own NVTX calls would come back to it), or
 * in a secure-execution process; the variable is set before the program's
 * main (the constructor), so it is inherited by its children: one under
 * cudapool knows its own library there for no tool (cp_nvtx_regions_is_self)
 * and one that is not refuses the injection. Nothing here
 * prints but the one CUDAPOOL_VERBOSE line. */
#ifndef CUDAPOOL_SHIM_NVTX_REGIONS_H
#define CUDAPOOL_SHIM_NVTX_REGIONS_H

#include <stdbool.h>
#include <stdio.h>

/* At start, once, after cp_nvtx_decide: with `wanted` (the option) and
 * `injection` (NVTX_INJECTION64_PATH's value, NULL when unset), names this
 * library as the NVTX tool when the rules above allow; with `verbose` it
 * says which on one line. */
void cp_nvtx_regions_start(bool wanted, const char *injection, FILE *verbose);
/* Whether injection (NVTX_INJECTION64_PATH's value) names this library:
 * a child of a process that named itself there inherits the variable, and
 * must not take it for a tool (CUDAPOOL_NVTX auto would turn on). */
bool cp_nvtx_regions_is_self(const char *injection);

#endif
