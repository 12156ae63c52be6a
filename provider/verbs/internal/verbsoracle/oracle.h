/* Prototypes of the verbs.h constant table (oracle.c). */
#ifndef SHIFT_VERBSORACLE_H
#define SHIFT_VERBSORACLE_H

typedef struct {
	const char *name;
	long long value;
} vo_named;

const vo_named *vo_table(int *n);
int vo_available(void);

#endif
