/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * Aligned text tables for dlqctl's status and policies output (see
 * dlqctl.h): every row is kept until the table is printed, so each column
 * is as wide as its widest cell, separated by two spaces.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlqctl.h"

struct table {
	size_t cols;
	size_t rows;           /* including the title row */
	size_t cap;
	char **cells;          /* rows * cols, owned */
	bool *right;           /* cols */
};

struct table *table__new(const char *const *titles, const bool *right)
{
	struct table *t = calloc(1, sizeof(*t));
	if(t == NULL) return NULL;
	while(titles[t->cols]){
		t->cols++;
	}
	t->right = calloc(t->cols ? t->cols : 1, sizeof(*t->right));
	if(t->right == NULL || table__add(t, titles)){
		table__free(t);
		return NULL;
	}
	for(size_t i = 0; right && i < t->cols; i++){
		t->right[i] = right[i];
	}
	return t;
}

int table__add(struct table *t, const char *const *cells)
{
	if(t->rows == t->cap){
		size_t cap = t->cap ? t->cap * 2 : 8;
		char **grown = realloc(t->cells, cap * t->cols * sizeof(*grown));
		if(grown == NULL) return ENOMEM;
		t->cells = grown;
		t->cap = cap;
	}
	char **row = t->cells + t->rows * t->cols;
	for(size_t i = 0; i < t->cols; i++){
		row[i] = strdup(cells[i] ? cells[i] : "-");
		if(row[i] == NULL){
			while(i > 0){
				free(row[--i]);
			}
			return ENOMEM;
		}
	}
	t->rows++;
	return 0;
}

void table__print(const struct table *t, FILE *f)
{
	size_t *width = calloc(t->cols ? t->cols : 1, sizeof(*width));
	if(width == NULL) return;
	for(size_t r = 0; r < t->rows; r++){
		for(size_t c = 0; c < t->cols; c++){
			size_t len = strlen(t->cells[r * t->cols + c]);
			if(len > width[c]) width[c] = len;
		}
	}
	for(size_t r = 0; r < t->rows; r++){
		for(size_t c = 0; c < t->cols; c++){
			const char *cell = t->cells[r * t->cols + c];
			bool last = c + 1 == t->cols;
			/* Titles align as their column does. */
			if(t->right[c]){
				fprintf(f, "%*s%s", (int)width[c], cell, last ? "" : "  ");
			}else if(last){
				fputs(cell, f);
			}else{
				fprintf(f, "%-*s  ", (int)width[c], cell);
			}
		}
		fputc('\n', f);
	}
	free(width);
}

void table__free(struct table *t)
{
	if(t == NULL) return;
	for(size_t i = 0; i < t->rows * t->cols; i++){
		free(t->cells[i]);
	}
	free(t->cells);
	free(t->right);
	free(t);
}
