/* SPDX-License-Identifier: MIT */
/**
 * @file tern/tern.h
 * tern: move memory between processes and hosts with RDMA, over libfabric.
 * Umbrella header; see docs/api.md for the model and the completion
 * contract.
 */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <tern/common.h>
#include <tern/util.h>
#include <tern/ctx.h>
#include <tern/mr.h>
#include <tern/req.h>
#include <tern/loop.h>
#include <tern/info.h>
#include <tern/boot.h>
#include <tern/hmem.h>
#include <tern/world.h>

#endif /* TERN_TERN_H */
