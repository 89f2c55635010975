/* SPDX-License-Identifier: MIT */
/**
 * @file tern/info.h
 * What the providers on this host offer, as `tern info` prints it.
 */
#ifndef TERN_INFO_H
#define TERN_INFO_H

#include <stddef.h>
#include <stdint.h>

#include <tern/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One RDM endpoint offering of one provider on one domain. */
struct tern_prov_info {
	char provider[64]; /**< e.g. "tcp;ofi_rxm" */
	char fabric[128];
	char domain[128];
	char ep_type[24]; /**< "FI_EP_RDM", ... */
	char addr_format[24];
	char progress[16];   /**< data progress: "manual" / "auto" */
	uint64_t link_speed; /**< bits per second, 0 when not reported */
	char link_state[16]; /**< "up", "down", "unknown" */
	size_t tx_size;
	size_t rx_size;
	uint64_t max_msg_size;
	size_t inject_size;
	size_t cq_data_size;
	size_t mr_key_size;
	uint64_t mr_mode; /**< FI_MR_* bits */
	char mr_mode_str[160];
	int rma;	    /**< FI_RMA offered */
	int atomic;	    /**< FI_ATOMIC offered */
	int remote_cq_data; /**< cq_data_size >= 4 */
	int hmem;	    /**< FI_HMEM offered */
	int tagged;	    /**< FI_TAGGED offered */
	int rx_cq_data;	    /**< needs receives posted for remote CQ data */
	int usable;	    /**< tern can run on it */
	/** 1: completion queues offer a wait fd (an idle loop sleeps on
	 * it); 0: tern polls with short sleeps (docs/loop.md). */
	int wait_fd;
	char why_not[96]; /**< when !usable: what is missing */
};

/**
 * List the RDM offerings of @p provider (or of every provider when NULL),
 * one entry per provider and domain. @p provider is a name as
 * tern_ctx_attr.provider takes it: "verbs" lists verbs;ofi_rxm, and "tcp"
 * tcp;ofi_rxm, on libfabric 2.x after tcp's own RDM endpoint ("tcp",
 * which tern opens for it there). The caller frees the array with
 * tern_info_free().
 * @return 0 and *list_p / *count_p (count may be 0); -ENOMEM;
 * -TERN_EPROV when fi_getinfo fails for another reason than "no match".
 */
TERN_API int tern_info_list(const char *provider,
			    struct tern_prov_info **list_p, size_t *count_p);

/** Free what tern_info_list() returned. NULL is fine. */
TERN_API void tern_info_free(struct tern_prov_info *list);

#ifdef __cplusplus
}
#endif

#endif /* TERN_INFO_H */
