# make install / make uninstall, under $(DESTDIR)$(PREFIX) (PREFIX absolute,
# default /usr/local):
#   lib/libcudapool.so.X.Y.Z, lib/libcudapool.so.X and lib/libcudapool.so
#                              the library and its two links (mk/shim.mk)
#   include/cudapool.h         the control API
#   lib/pkgconfig/cudapool.pc  from mk/cudapool.pc.in, with PREFIX and VERSION
#   bin/cudapool, bin/cudapool-replay, bin/cudapool-plot, bin/cudapool-stats,
#   bin/cudapool-view, bin/cudapool-export
#                              (INSTALL_PROGRAMS)
#   share/cudapool/cpviz/*     the viewer's package (scripts/cpviz), which
#                              cudapool-view and cudapool-export look for there
#   share/man/man1/cudapool.1  from docs/cudapool.1
#   share/man/man1/cudapool-replay.1, -plot.1, -stats.1, -view.1, -export.1
#                              from docs/ (MAN_PAGES: one for each program of
#                              INSTALL_PROGRAMS, held to its --help by
#                              tests/unit/shim/manpages.c)
# The layout under PREFIX is fixed: the installed launcher finds the library
# as ../lib/libcudapool.so from its own folder. uninstall removes exactly
# these files (of this version), then each of those folders that is left
# empty (deepest first; one another package still uses stays, and PREFIX
# itself always does). A fragment with another program to install adds it
# to INSTALL_PROGRAMS before this file is included (Makefile includes it
# last).

INSTALL_PROGRAMS += scripts/cudapool $(REPLAY_BIN) scripts/cudapool-plot scripts/cudapool-view \
                    scripts/cudapool-export
MAN_PAGES := docs/cudapool.1 docs/cudapool-replay.1 docs/cudapool-plot.1 docs/cudapool-stats.1 \
             docs/cudapool-view.1 docs/cudapool-export.1
CPVIZ_FILES := $(sort $(wildcard scripts/cpviz/*.py scripts/cpviz/*.js scripts/cpviz/*.css))

INSTALL_BINDIR := $(DESTDIR)$(PREFIX)/bin
INSTALL_LIBDIR := $(DESTDIR)$(PREFIX)/lib
INSTALL_INCDIR := $(DESTDIR)$(PREFIX)/include
INSTALL_PCDIR  := $(DESTDIR)$(PREFIX)/lib/pkgconfig
INSTALL_MANDIR := $(DESTDIR)$(PREFIX)/share/man/man1
INSTALL_CPVIZDIR := $(DESTDIR)$(PREFIX)/share/cudapool/cpviz

INSTALLED_FILES := $(addprefix $(INSTALL_LIBDIR)/,$(SHIM_REAL_NAME) $(SHIM_SONAME) libcudapool.so) \
                   $(INSTALL_INCDIR)/cudapool.h $(INSTALL_PCDIR)/cudapool.pc \
                   $(addprefix $(INSTALL_BINDIR)/,$(notdir $(INSTALL_PROGRAMS))) \
                   $(addprefix $(INSTALL_MANDIR)/,$(notdir $(MAN_PAGES))) \
                   $(addprefix $(INSTALL_CPVIZDIR)/,$(notdir $(CPVIZ_FILES)))

# The prefix goes into cudapool.pc and is where the launcher is run from:
# a relative one would name a different place from every other folder.
check_prefix = @case '$(PREFIX)' in /*) ;; *) \
  echo "make $@: PREFIX must be an absolute path, not \"$(PREFIX)\"" >&2; exit 2 ;; esac

.PHONY: install uninstall
install: $(BUILD)/$(SHIM_REAL_NAME) $(INSTALL_PROGRAMS) include/cudapool.h mk/cudapool.pc.in $(MAN_PAGES) \
         $(CPVIZ_FILES)
	$(check_prefix)
	$(Q)install -d '$(INSTALL_BINDIR)' '$(INSTALL_LIBDIR)' '$(INSTALL_INCDIR)' '$(INSTALL_PCDIR)' \
	  '$(INSTALL_MANDIR)' '$(INSTALL_CPVIZDIR)'
	$(call say,INSTALL,$(INSTALL_LIBDIR)/$(SHIM_REAL_NAME))install -m 755 $(BUILD)/$(SHIM_REAL_NAME) \
	  '$(INSTALL_LIBDIR)/'
	$(Q)ln -sfn $(SHIM_REAL_NAME) '$(INSTALL_LIBDIR)/$(SHIM_SONAME)'
	$(Q)ln -sfn $(SHIM_SONAME) '$(INSTALL_LIBDIR)/libcudapool.so'
	$(call say,INSTALL,$(INSTALL_INCDIR)/cudapool.h)install -m 644 include/cudapool.h '$(INSTALL_INCDIR)/'
	$(call say,INSTALL,$(INSTALL_PCDIR)/cudapool.pc)sed -e 's|@PREFIX@|$(PREFIX)|g' \
	  -e 's|@VERSION@|$(VERSION)|g' mk/cudapool.pc.in >'$(INSTALL_PCDIR)/cudapool.pc'
	$(Q)chmod 644 '$(INSTALL_PCDIR)/cudapool.pc'
	$(call say,INSTALL,$(INSTALL_BINDIR)/ $(notdir $(INSTALL_PROGRAMS)))install -m 755 \
	  $(INSTALL_PROGRAMS) '$(INSTALL_BINDIR)/'
	$(call say,INSTALL,$(INSTALL_MANDIR)/ $(notdir $(MAN_PAGES)))install -m 644 $(MAN_PAGES) '$(INSTALL_MANDIR)/'
	$(call say,INSTALL,$(INSTALL_CPVIZDIR)/)install -m 644 $(CPVIZ_FILES) '$(INSTALL_CPVIZDIR)/'

uninstall:
	$(check_prefix)
	$(call say,RM,$(DESTDIR)$(PREFIX): the files install put there)rm -f \
	  $(foreach f,$(INSTALLED_FILES),'$(f)')
	$(Q)rm -rf '$(INSTALL_CPVIZDIR)/__pycache__' # what Python wrote when the viewer ran
	$(Q)for d in '$(INSTALL_CPVIZDIR)' '$(DESTDIR)$(PREFIX)/share/cudapool' \
	  '$(INSTALL_MANDIR)' '$(DESTDIR)$(PREFIX)/share/man' '$(DESTDIR)$(PREFIX)/share' \
	  '$(INSTALL_PCDIR)' '$(INSTALL_LIBDIR)' '$(INSTALL_INCDIR)' '$(INSTALL_BINDIR)'; do \
	  [ ! -d "$$d" ] || rmdir --ignore-fail-on-non-empty "$$d"; done
