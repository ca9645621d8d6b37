/*
 * registry.h
 *	  Shared memory of redislock: this server instance's id and the session
 *	  counter that makes owner ids unique.
 *
 * src/registry.h
 */
#ifndef REDISLOCK_REGISTRY_H
#define REDISLOCK_REGISTRY_H

extern void rl_registry_request(void);
extern void rl_registry_startup(void);
extern bool rl_registry_attached(void);
extern void rl_registry_owner_id(char *buf, size_t size);

#endif							/* REDISLOCK_REGISTRY_H */
